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

Rows are shared out among requests (fair share) and long rows decode in a lane of their own:
seed_tot/cli/api_server/lanes.py. Each session is fed through seed_tot/search/flights.py, as the
CLI's driver feeds its own, so a plain vote whose winner is sure stops here too.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from typing import Any, Callable

from seed_tot.cli.api_server.jobs import DriverClosed, Job, QueueFull, flagged
from seed_tot.cli.api_server.lanes import (LONG_ROW_TOKENS, ROWS_PER_REQUEST, Lane, feed_fair_share, furthest_behind,
                                           lane_for, open_lanes, share_kv)
from seed_tot.requests import ContinuousBatching, Executor
from seed_tot.search.base import SearchResult
from seed_tot.search.flights import Flight
from seed_tot.search.steps import Batch, BatchOutcome, StepRunner, Task, execute, split

log = logging.getLogger(__name__)


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
        self._lanes: list[Lane] = []  # the sessions (none: rounds); the long lane, if any, second
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
            self._lanes = []  # the executor closes below, its sessions with it
            for job in list(self.running) + self._queued_jobs():
                self._fail(job, DriverClosed("The server shut down before this tree was finished."))
            self.executor.close()

    def _reset(self) -> None:
        self._runner = StepRunner()
        self._lanes = open_lanes(self.executor) if self.continuous else []
        self._kv_total = getattr(self._lanes[0].session, "max_kv_tokens", None) if self._lanes else None
        self._job_of = {}

    def _idle(self) -> bool:
        return not self.running and not self._flights() and not any(lane.session.busy for lane in self._lanes)

    def _flights(self) -> list[Flight]:
        return [flight for lane in self._lanes for flight in lane.feeder.flights]

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

    def _session_step(self) -> None:
        """One step of one lane: the one furthest below its share of the time while both have rows."""
        for task in self._runner.take_waiting():
            job = self._live(task)
            if job is None:
                continue
            job.prompt_tokens += sum(len(r.prompt_ids) for r in task.batch.requests)
            requests = flagged(task.batch.requests, job)
            lane_for(self._lanes, requests, self.long_row_tokens).feeder.add(task, requests, owner=job)
        ready = [lane for lane in self._lanes if lane.session.busy
                 or any(flight.waiting and not flight.owner.cancelled for flight in lane.feeder.flights)]
        if not ready:
            return
        lane = furthest_behind(ready)
        self._feed(lane)
        if not lane.session.busy:
            return
        share_kv(self._lanes, lane, self._kv_total)
        started = time.perf_counter()
        done = lane.feeder.step()
        if len(ready) > 1:
            lane.spent += time.perf_counter() - started
        else:  # one lane alone owes the other nothing
            for each in self._lanes:
                each.spent = 0.0
        for flight in done:
            job = flight.owner
            if job.cancelled or job.finished:
                self.rows_cancelled += sum(r.finish_reason == "cancelled" for r in flight.results.values())
                continue
            self._deliver(job, flight.task, flight.batch.role, flight.outcome())

    def _feed(self, lane: Lane) -> None:
        feed_fair_share(lane, self._flights(), self.rows_per_request)

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
        for lane in self._lanes:
            flights = [flight for flight in lane.feeder.flights if flight.owner is job]
            # every request that did not end by itself: never sent, still decoding, or ended by its flag
            self.rows_cancelled += sum(len(flight.requests) - len(flight.results) for flight in flights)
            self.rows_cancelled += sum(r.finish_reason == "cancelled" for flight in flights
                                       for r in flight.results.values())
            lane.feeder.forget(flights)

    def _notify(self, job: Job, value: Any) -> None:
        if job.finished:
            return
        job.finished = True
        try:
            job.on_done(value)
        except Exception:
            log.exception("on_done of %s failed", job.job_id)

