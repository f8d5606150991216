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
