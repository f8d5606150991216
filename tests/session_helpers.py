"""Feeding a decode session the way a busy driver does: requests join at different steps."""


def staggered(session, reqs, joins):
    """Add request i at decode step joins[i]; results in request order."""
    order = sorted(range(len(reqs)), key=lambda i: joins[i])
    of_ticket, results, step = {}, {}, 0
    while order or session.busy:
        while order and joins[order[0]] <= step:
            index = order.pop(0)
            of_ticket[session.add([reqs[index]])[0]] = index
        for ticket, result in session.step():
            results[of_ticket[ticket]] = result
        step += 1
    return [results[i] for i in range(len(reqs))]


def cancelled_midway(session, reqs, first: int, steps: int, dropped: list[int]):
    """Add reqs[:first], run `steps` steps, add the rest, then cancel the requests at the indices
    `dropped` (some decoding, some queued) and drain. (results by index, the width the session
    had right after the cancel, the width it should have had: the unended requests kept)."""
    tickets = session.add(reqs[:first])
    results = {}
    for _ in range(steps):
        results.update(session.step())
    tickets += session.add(reqs[first:])
    session.cancel([tickets[i] for i in dropped])
    width = session.width
    kept = len([i for i, t in enumerate(tickets) if t not in results and i not in dropped])
    while session.busy:
        results.update(session.step())
    return {i: results[t] for i, t in enumerate(tickets) if t in results}, width, kept
