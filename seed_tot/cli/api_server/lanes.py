"""How the API server shares its continuous batch out among requests: lanes and fair share.

Fair share: while several requests have rows to decode, the rows of one request (its n trees) in
a session are capped at `rows_per_request` (alone, at ROWS_ALONE); the rest of its batches wait in
the driver and join as its rows end, the requests taking turns. So the batch stays narrow enough for
a small request's rows to step quickly while a large one runs, and no single join (a prefill) grows
with the size of one request.

Long rows decode apart (the batched executors, whose rows share one padded KV cache): a batch whose
requests may each hold more than LONG_ROW_TOKENS KV tokens (prompt and max_new_tokens) goes to a
second session, the long lane. Sharing the padded cache with such rows made every short row attend
over their length, and every join or exit of a short row copy it. While both lanes have rows, the
driver steps the lane that has had less than its share of the time (the long one LONG_SHARE of it),
so a short request's latency stays within about 1 / (1 - LONG_SHARE) of its own while the long one
still gets its share and finishes.
"""

from __future__ import annotations

from dataclasses import dataclass

from seed_tot.requests import Executor, GenerationRequest, Session
from seed_tot.scheduling.session import held_tokens
from seed_tot.search.flights import SessionFeeder

ROWS_PER_REQUEST = 16  # rows of one request in the shared batch at once while other requests have rows there
ROWS_ALONE = 64  # ... and while it is the only one: a bound on the width of any one join (a prefill)
LONG_ROW_TOKENS = 1024  # a batch whose requests may hold more KV tokens than this decodes in the long lane
LONG_SHARE = 1 / 3  # of the driver's time, the long lane's while the short lane has rows too


@dataclass(eq=False)
class Lane:
    """One continuous-batching session of the driver, its flights and its time."""

    name: str  # "short" or "long"
    feeder: SessionFeeder
    share: float  # of the driver's time while the other lane has rows too
    spent: float = 0.0  # seconds stepped since both lanes last had rows

    @property
    def session(self) -> Session:
        return self.feeder.session


def open_lanes(executor: Executor) -> list[Lane]:
    """The short lane, and a long one where the executor pads its rows (the long one second)."""
    if not pads_rows(executor):
        return [Lane("short", SessionFeeder(executor.session()), 1.0)]
    return [Lane("short", SessionFeeder(executor.session()), 1 - LONG_SHARE),
            Lane("long", SessionFeeder(executor.session()), LONG_SHARE)]


def lane_for(lanes: list[Lane], requests: list[GenerationRequest], long_row_tokens: int) -> Lane:
    if len(lanes) > 1 and max(map(held_tokens, requests), default=0) > long_row_tokens:
        return lanes[1]
    return lanes[0]


def furthest_behind(ready: list[Lane]) -> Lane:
    """The lane furthest below its share of the time."""
    return min(ready, key=lambda lane: lane.spent / lane.share)


def share_kv(lanes: list[Lane], lane: Lane, kv_total: int | None) -> None:
    """With two lanes, the memory budget of the rows' KV (--max-memory) is one: the lane about to
    step may let rows join within what the other lane's rows leave of it."""
    if kv_total is None or len(lanes) < 2 or not hasattr(lane.session, "max_kv_tokens"):
        return
    held = sum(held_tokens(row.request) for other in lanes if other is not lane
               for row in getattr(other.session, "active", ()))
    lane.session.max_kv_tokens = max(1, kv_total - held)


def joining(flights: list[tuple[str, int, int]], share: int, alone: int, shared: bool | None = None) -> list[int]:
    """How many waiting requests of each flight (owner, rows in the session, requests waiting) join
    now: in flight order, while the owner's rows stay within `share`, or `alone` when one owner has
    flights (`shared`: whether other owners have flights, elsewhere too; default: among these)."""
    if shared is None:
        shared = len({owner for owner, _, _ in flights}) > 1
    cap = share if shared else max(share, alone)
    rows: dict[str, int] = {}
    for owner, in_session, _ in flights:
        rows[owner] = rows.get(owner, 0) + in_session
    counts = []
    for owner, _, waiting in flights:
        count = max(0, min(waiting, cap - rows[owner]))
        rows[owner] += count
        counts.append(count)
    return counts


def pads_rows(executor: Executor) -> bool:
    """Whether the executor's sessions keep their rows in one padded KV cache (the batched ones:
    every row attends over the longest row's slots, every join copies the cache), so that long rows
    cost the short ones beside them; such an executor may open two sessions at once."""
    from seed_tot.scheduling.batched.ar import BatchedARExecutor
    from seed_tot.scheduling.batched.speculative import BatchedSpeculativeExecutor

    return isinstance(executor, (BatchedARExecutor, BatchedSpeculativeExecutor))


def feed_fair_share(lane: Lane, flights: list, rows_per_request: int) -> None:
    """Add the lane's flights' requests to its session within each request's fair share (the owners
    of `flights`, every lane's, count)."""
    live = [flight for flight in flights if not flight.owner.cancelled]
    shared = len({flight.owner.owner or flight.owner.job_id for flight in live}) > 1
    live = [flight for flight in lane.feeder.flights if not flight.owner.cancelled]
    counts = joining([(flight.owner.owner or flight.owner.job_id, flight.in_session, flight.waiting)
                      for flight in live], rows_per_request, ROWS_ALONE, shared=shared)
    for flight, count in zip(live, counts):
        if count:
            lane.feeder.send(flight, count)
