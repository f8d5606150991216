"""One thread owns the executor and grows every request's tree in one continuous batch.

Requests arrive as `Job`s (a search built with the request's own seed, and its problem). The
driver thread admits up to `concurrency` of them, runs each as a step generator
(seed_tot/search/steps.py) and feeds every batch a search asks for into ONE continuous-batching
session of the executor (as `seed-tot <task> --concurrency` does, seed_tot/search/driver.py), or,
for an executor without sessions, merges the waiting batches round by round. A finished search is
handed to `finish` (which writes its trace) and then to the job's `on_done`, on this thread:
callers hop back to their own event loop themselves.

A cancelled job (its client went away, or the server stops) is never advanced again: every request
it sends carries the job's cancel flag, so its rows leave the batch at the session's next decode
step (and an executor's `run` of a round ends them there too), before the driver thread even looks;
its waiting batches are dropped. Other jobs go on, their rows untouched.

Fair share: while several requests have rows to decode, the rows of one request (its n trees) in
the session are capped at `rows_per_request` (alone, at ROWS_ALONE); the rest of its batches wait in
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

import logging
import queue
import threading
import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable

from seed_tot.errors import SeedTotError
from seed_tot.metrics import event_records
from seed_tot.requests import Cancel, ContinuousBatching, Executor, GenerationRequest, GenerationResult, Session, SessionEvents
from seed_tot.search.base import Search, SearchResult
from seed_tot.scheduling.session import held_tokens
from seed_tot.search.steps import Batch, BatchOutcome, StepRunner, Task, execute, split
from seed_tot.task import Problem

log = logging.getLogger(__name__)

ROWS_PER_REQUEST = 16  # rows of one request in the shared batch at once while other requests have rows there
ROWS_ALONE = 64  # ... and while it is the only one: a bound on the width of any one join (a prefill)
LONG_ROW_TOKENS = 1024  # a batch whose requests may hold more KV tokens than this decodes in the long lane
LONG_SHARE = 1 / 3  # of the driver's time, the long lane's while the short lane has rows too


class DriverClosed(SeedTotError):
    """The server is shutting down and accepts no new request."""


class QueueFull(SeedTotError):
    """More trees wait than the server was told to hold (--max-queue)."""


@dataclass(eq=False)
class Job:
    """One request's tree: its id (the trace id), search, problem and callbacks (driver thread)."""

    job_id: str
    search: Search
    problem: Problem
    on_done: Callable[[Any], None]  # called once with the finish() value or an exception
    on_progress: Callable[[dict], None] = lambda event: None
    owner: str = ""  # the request whose tree this is (its jobs share the fair share); "" : the job's own id
    flag: Cancel = field(default_factory=Cancel)  # set with `cancelled`; carried by every request it sends
    cancelled: bool = False
    finished: bool = False
    root: Task | None = None
    prompt_tokens: int = 0  # prompt tokens of every request the tree sent
    completion_tokens: int = 0  # tokens generated for the tree
    batches: int = 0
    submitted: float = field(default_factory=time.perf_counter)


@dataclass(eq=False)
class _Lane:
    """One continuous-batching session of the driver, its tickets' flights and its time."""

    name: str  # "short" or "long"
    session: Session
    share: float  # of the driver's time while the other lane has rows too
    spent: float = 0.0  # seconds stepped since both lanes last had rows
    by_ticket: dict[int, "_InFlight"] = field(default_factory=dict)


@dataclass(eq=False)
class _InFlight:
    """A batch of one job in a lane's session: its requests join `rows_per_request` at a time."""

    task: Task
    job: Job
    role: str
    requests: list[GenerationRequest]
    lane: _Lane
    tickets: list[int] = field(default_factory=list)  # of the requests added so far, in order
    sent: float = field(default_factory=time.perf_counter)
    widest: int = 0
    results: dict[int, GenerationResult] = field(default_factory=dict)  # by ticket

    @property
    def in_session(self) -> int:
        return len(self.tickets) - len(self.results)

    @property
    def done(self) -> bool:
        return len(self.results) == len(self.requests)

    @property
    def waiting(self) -> int:
        """Requests not yet added to the session."""
        return len(self.requests) - len(self.tickets)


class TreeDriver:
    """Owns an executor and grows the trees on one thread; `submit` jobs from any thread, `close` to stop.

    `open_executor` (it loads the models) runs on the thread that grows the trees, so every torch
    operation of the server runs on that one thread. With `own_thread`, that is a thread of its own
    (tests, notebooks); without, the caller's, which then calls `run()`: the CLI grows the trees on
    its main thread and serves HTTP on another, as `seed-tot gsm8k` decodes on its main thread.
    Decoding on a second thread measured 27% slower with one request at a time on a 2-core CPU
    (scripts/bench_api.py): that thread's OpenMP helper thread sat idle a quarter of the time, where the
    main thread's keeps its core busy."""

    def __init__(self, open_executor: Callable[[], Executor], concurrency: int,
                 finish: Callable[[Job, SearchResult], Any], continuous: bool = True,
                 max_queue: int | None = None, own_thread: bool = True,
                 rows_per_request: int = ROWS_PER_REQUEST, long_row_tokens: int = LONG_ROW_TOKENS) -> None:
        if concurrency < 1:
            raise ValueError(f"concurrency must be at least 1 (got {concurrency})")
        self.rows_per_request = rows_per_request
        self.long_row_tokens = long_row_tokens
        self.executor: Executor | None = None
        self.concurrency = concurrency
        self.max_queue = max_queue
        self.finish = finish
        self.continuous = continuous
        self._incoming: queue.Queue[Job | None] = queue.Queue()
        self._closing = False
        self._lock = threading.Lock()
        self.running: list[Job] = []
        self.completed = 0
        self.rows_cancelled = 0  # requests of cancelled or failed trees taken out of the session unfinished
        self.cancelled = 0  # trees cancelled before they were finished
        self._lanes: list[_Lane] = []  # the sessions (none: rounds); the long lane, if any, second
        self._stopped = threading.Event()
        if not own_thread:
            self._open(open_executor)
            return
        opened: list[BaseException | None] = []
        ready = threading.Event()

        def open_then_run() -> None:
            try:
                self._open(open_executor)
                opened.append(None)
            except BaseException as exc:  # raised again below, on the thread that asked
                opened.append(exc)
                self._stopped.set()
                return
            finally:
                ready.set()
            self.run()

        threading.Thread(target=open_then_run, name="seed-tot-api-driver", daemon=True).start()
        ready.wait()
        if opened[0] is not None:
            raise opened[0]

    def _open(self, open_executor: Callable[[], Executor]) -> None:
        self.executor = open_executor()
        self.continuous = self.continuous and isinstance(self.executor, ContinuousBatching)
        self.two_lanes = self.continuous and _pads_rows(self.executor)

    # --- any thread ---------------------------------------------------------------------
    def submit(self, jobs: list[Job]) -> None:
        """Queue the jobs of one request, all or none."""
        with self._lock:
            self.check_room(len(jobs))
            for job in jobs:
                self._incoming.put(job)

    def check_room(self, trees: int) -> None:
        """Raise DriverClosed or QueueFull when `trees` more could not be queued now (callers ask
        before building anything, and `submit` asks again)."""
        if self._closing:
            raise DriverClosed("The server is shutting down: send the request again once it is back.")
        if self.max_queue is not None and self.queued + trees > self.max_queue:
            raise QueueFull(f"{self.queued} trees already wait for the {self.concurrency} being grown: "
                            "send the request again in a moment.")

    def cancel(self, job: Job) -> None:
        """Stop `job`: its rows leave the batch at the next decode step, its result (if any) is
        dropped; safe after it finished."""
        job.cancelled = True
        job.flag.set()
        self._incoming.put(None)  # wake an idle loop

    def close(self, drain: bool = True, timeout: float | None = None) -> bool:
        """Accept nothing more; finish (drain) or cancel the jobs in hand; stop the thread and close
        the executor. True when the thread ended within `timeout`."""
        with self._lock:
            self._closing = True
        if not drain:
            for job in list(self.running) + self._queued_jobs():
                job.cancelled = True
                job.flag.set()
        self._incoming.put(None)
        return self._stopped.wait(timeout)

    @property
    def queued(self) -> int:
        return len(self._queued_jobs())

    @property
    def rows(self) -> int:
        """Requests the continuous-batching sessions hold (decoding or about to join); 0 without one."""
        return sum(lane.session.width for lane in list(self._lanes))

    def _queued_jobs(self) -> list[Job]:
        with self._incoming.mutex:
            return [job for job in self._incoming.queue if job is not None]

    # --- the thread that grows the trees -------------------------------------------------
    def run(self) -> None:
        """Grow the trees until `close`; then close the executor."""
        try:
            self._loop()
        finally:
            self._stopped.set()

    def _loop(self) -> None:
        self._reset()
        try:
            while True:
                try:
                    if not self._admit():
                        return
                    if self._lanes:
                        self._session_step()
                    else:
                        self._round()
                    self._retire()
                except Exception as exc:  # the executor failed (a step, or taking rows out): every tree in it fails
                    log.exception("executor failed")
                    failed = list(self.running)
                    self._reset()  # first: the failed session's rows are not taken out one by one
                    for job in failed:
                        self._fail(job, exc)
        finally:
            self._flights, self._lanes = [], []  # the executor closes below, its sessions with it
            for job in list(self.running) + self._queued_jobs():
                self._fail(job, DriverClosed("The server shut down before this tree was finished."))
            self.executor.close()

    def _reset(self) -> None:
        self._runner = StepRunner()
        self._lanes = []
        if self.continuous:
            self._lanes.append(_Lane("short", self.executor.session(), 1 - LONG_SHARE if self.two_lanes else 1.0))
            if self.two_lanes:
                self._lanes.append(_Lane("long", self.executor.session(), LONG_SHARE))
        self._kv_total = getattr(self._lanes[0].session, "max_kv_tokens", None) if self._lanes else None
        self._flights, self._job_of = [], {}

    def _idle(self) -> bool:
        return not self.running and not self._flights and not any(lane.session.busy for lane in self._lanes)

    def _admit(self) -> bool:
        """Start queued jobs while there is room; block while idle. False: closing and done."""
        self._retire()
        while True:
            idle = self._idle()
            if self._closing and idle and self._incoming.empty():
                return False
            if len(self.running) >= self.concurrency:
                return True
            try:
                job = self._incoming.get(block=idle, timeout=0.2)
            except queue.Empty:
                if idle:
                    continue
                return True
            if job is None:
                continue
            if job.cancelled:
                self._drop(job)
                continue
            self.running.append(job)
            try:
                job.root = self._runner.start(job.search.steps(job.problem))
            except Exception as exc:
                self._fail(job, exc)
                continue
            self._job_of[job.root] = job
            self._retire()  # a search that needs no model call ends at once

    def _owner(self, task: Task) -> Job | None:
        while task.parent is not None:
            task = task.parent
        return self._job_of.get(task)

    def _live(self, task: Task) -> Job | None:
        job = self._owner(task)
        return job if job is not None and not job.cancelled and not job.finished else None

    def _deliver(self, job: Job, task: Task, role: str, outcome: BatchOutcome) -> None:
        job.batches += 1
        job.completion_tokens += sum(r.stats.new_tokens for r in outcome.results)
        try:
            self._runner.deliver(task, outcome)
        except Exception as exc:
            self._fail(job, exc)
            return
        job.on_progress({"batches": job.batches, "role": role, "prompt_tokens": job.prompt_tokens,
                         "completion_tokens": job.completion_tokens})

    def _lane_of(self, requests: list[GenerationRequest]) -> _Lane:
        if len(self._lanes) > 1 and max(map(held_tokens, requests), default=0) > self.long_row_tokens:
            return self._lanes[1]
        return self._lanes[0]

    def _session_step(self) -> None:
        """One step of one lane: the one furthest below its share of the time while both have rows."""
        for task in self._runner.take_waiting():
            job = self._live(task)
            if job is None:
                continue
            job.prompt_tokens += sum(len(r.prompt_ids) for r in task.batch.requests)
            requests = flagged(task.batch.requests, job)
            self._flights.append(_InFlight(task, job, task.batch.role, requests, self._lane_of(requests)))
        waiting = {id(flight.lane) for flight in self._flights if flight.waiting and not flight.job.cancelled}
        ready = [lane for lane in self._lanes if lane.session.busy or id(lane) in waiting]
        if not ready:
            return
        lane = min(ready, key=lambda lane: lane.spent / lane.share)
        self._feed(lane)
        if not lane.session.busy:
            return
        self._share_kv(lane)
        session = lane.session
        width = session.width
        for flight in self._flights:
            if flight.lane is lane:
                flight.widest = max(flight.widest, width)
        started = time.perf_counter()
        ended = session.step()
        if len(ready) > 1:
            lane.spent += time.perf_counter() - started
        else:  # one lane alone owes the other nothing
            for each in self._lanes:
                each.spent = 0.0
        for ticket, result in ended:
            flight = lane.by_ticket.pop(ticket)
            flight.results[ticket] = result
            if not flight.done:
                continue
            self._flights.remove(flight)
            events = session.take_events(flight.tickets) if isinstance(session, SessionEvents) else None
            if flight.job.cancelled or flight.job.finished:
                self.rows_cancelled += sum(r.finish_reason == "cancelled" for r in flight.results.values())
                continue
            outcome = BatchOutcome(results=[flight.results[t] for t in flight.tickets],
                                   wall_seconds=time.perf_counter() - flight.sent,
                                   events=event_records(events) if events is not None else None,
                                   merged_size=flight.widest)
            self._deliver(flight.job, flight.task, flight.role, outcome)

    def _feed(self, lane: _Lane) -> None:
        """Add the lane's flights' requests to its session within each request's fair share (the
        owners in every lane count)."""
        live = [flight for flight in self._flights if not flight.job.cancelled]
        shared = len({flight.job.owner or flight.job.job_id for flight in live}) > 1
        live = [flight for flight in live if flight.lane is lane]
        counts = joining([(flight.job.owner or flight.job.job_id, flight.in_session, flight.waiting) for flight in live],
                         self.rows_per_request, ROWS_ALONE, shared=shared)
        for flight, count in zip(live, counts):
            if count:
                start = len(flight.tickets)
                tickets = lane.session.add(flight.requests[start:start + count])
                flight.tickets.extend(tickets)
                lane.by_ticket.update((ticket, flight) for ticket in tickets)

    def _share_kv(self, lane: _Lane) -> None:
        """With two lanes, the memory budget of the rows' KV (--max-memory) is one: the lane about to
        step may let rows join within what the other lane's rows leave of it."""
        if self._kv_total is None or len(self._lanes) < 2 or not hasattr(lane.session, "max_kv_tokens"):
            return
        held = sum(held_tokens(row.request) for other in self._lanes if other is not lane
                   for row in getattr(other.session, "active", ()))
        lane.session.max_kv_tokens = max(1, self._kv_total - held)

    def _round(self) -> None:
        waiting = [(task, job) for task in self._runner.take_waiting() if (job := self._live(task)) is not None]
        if not waiting:
            return
        requests = [r for task, job in waiting for r in flagged(task.batch.requests, job)]
        for task, job in waiting:
            job.prompt_tokens += sum(len(r.prompt_ids) for r in task.batch.requests)
        merged = Batch(role="merged", node_id=-1, requests=requests)
        parts = split(execute(self.executor, merged), [len(task.batch.requests) for task, _ in waiting])
        for (task, job), part in zip(waiting, parts, strict=True):
            if not job.cancelled and not job.finished:
                self._deliver(job, task, task.batch.role, part)

    def _retire(self) -> None:
        """Hand every finished search to finish() and its job; forget cancelled jobs."""
        for job in list(self.running):
            if job.cancelled:
                self._drop(job)
            elif job.root is not None and job.root.done:
                self._end(job)

    def _end(self, job: Job) -> None:
        self._forget(job)
        try:
            value = self.finish(job, job.root.value)
        except Exception as exc:
            log.exception("finishing %s failed", job.job_id)
            value = exc
        self.completed += 1
        self._notify(job, value)

    def _fail(self, job: Job, exc: BaseException) -> None:
        self._forget(job)
        self._notify(job, exc)

    def _drop(self, job: Job) -> None:
        if not job.finished:
            self.cancelled += 1
        self._forget(job)
        self._notify(job, DriverClosed("The request was cancelled."))

    def _forget(self, job: Job) -> None:
        self._take_out_rows(job)
        if job in self.running:
            self.running.remove(job)
        if job.root is not None:
            self._job_of.pop(job.root, None)
            job.root.steps.close()

    def _take_out_rows(self, job: Job) -> None:
        """Cancel the job's requests still in the session: queued ones never join, rows decoding
        leave the batch before the next step."""
        flights = [flight for flight in self._flights if flight.job is job]
        for lane in self._lanes:
            unfinished = [t for flight in flights if flight.lane is lane for t in flight.tickets if t not in flight.results]
            if unfinished:
                lane.session.cancel(unfinished)
        # every request that did not end by itself: never sent, still decoding, or ended by its flag
        self.rows_cancelled += sum(len(flight.requests) - len(flight.results) for flight in flights)
        self.rows_cancelled += sum(r.finish_reason == "cancelled" for flight in flights for r in flight.results.values())
        for flight in flights:
            self._flights.remove(flight)
            for ticket in flight.tickets:
                flight.lane.by_ticket.pop(ticket, None)

    def _notify(self, job: Job, value: Any) -> None:
        if job.finished:
            return
        job.finished = True
        try:
            job.on_done(value)
        except Exception:
            log.exception("on_done of %s failed", job.job_id)


def flagged(requests: list[GenerationRequest], job: Job) -> list[GenerationRequest]:
    """The requests as sent for `job`: each carries the job's cancel flag (the search's own stay as they are)."""
    return [replace(request, cancel=job.flag) for request in requests]


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


def _pads_rows(executor: Executor) -> bool:
    """Whether the executor's sessions keep their rows in one padded KV cache (the batched ones:
    every row attends over the longest row's slots, every join copies the cache), so that long rows
    cost the short ones beside them; such an executor may open two sessions at once."""
    from seed_tot.scheduling.batched.ar import BatchedARExecutor
    from seed_tot.scheduling.batched.speculative import BatchedSpeculativeExecutor

    return isinstance(executor, (BatchedARExecutor, BatchedSpeculativeExecutor))
