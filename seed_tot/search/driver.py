"""Many problems at once: up to `concurrency` searches share the executor.

Two ways to share it:
- continuous (executors with the ContinuousBatching capability: the batched ones and SEED): every
  batch a search asks for joins the running decode batch at the next token step, and a search gets its outcome as soon
  as its own requests end, so one long row never holds the other searches back;
- rounds (every other executor): each round merges the waiting batch of every running search
  (thoughts of one problem, evaluations of another, a CoT candidate of a third) into ONE call.
A finished search leaves and the next problem joins, so the batch stays full. Results do not
depend on the concurrency or the mode: each request carries its own seed, and the batched
executors make a row's tokens independent of the other rows (tests/test_driver.py).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, Iterable, Iterator

from seed_tot.metrics import event_records
from seed_tot.requests import ContinuousBatching, Executor, GenerationResult, Session, SessionEvents, cancelled_result
from seed_tot.search.base import SearchResult
from seed_tot.search.steps import Batch, BatchOutcome, StepRunner, Steps, Task, run_round
from seed_tot.task import Problem


def solve_many(
    steps_of: Callable[[Problem], Steps[SearchResult]],
    problems: Iterable[Problem],
    executor: Executor,
    concurrency: int = 1,
    continuous: bool = True,
) -> Iterator[SearchResult]:
    """Search every problem with `steps_of(problem)`, up to `concurrency` at a time; yield each
    result as soon as its search ends (finishing order, which may differ from input order).
    continuous=False (or an executor without sessions) merges waiting batches round by round."""
    if concurrency < 1:
        raise ValueError(f"concurrency must be at least 1 (got {concurrency})")
    runner = StepRunner()
    feeder = _SessionFeeder(executor.session()) if continuous and isinstance(executor, ContinuousBatching) else None
    queue = iter(problems)
    running: list[Task] = []
    exhausted = False
    while True:
        while not exhausted and len(running) < concurrency:
            problem = next(queue, None)
            if problem is None:
                exhausted = True
            else:
                running.append(runner.start(steps_of(problem)))
        for task in [t for t in running if t.done]:
            running.remove(task)
            yield task.value
        if not running:
            if exhausted:
                return
            continue
        if feeder is not None:
            feeder.step(runner)
        else:
            run_round(runner, executor)


@dataclass(eq=False)
class _InFlight:
    task: Task
    batch: Batch
    tickets: list[int]
    sent: float = field(default_factory=time.perf_counter)
    widest: int = 0  # most rows decoding at once while this batch was in flight
    results: dict[int, GenerationResult] = field(default_factory=dict)


class _SessionFeeder:
    """Sends each waiting batch into one continuous-batching session and hands every task its
    outcome as soon as all of its requests have ended."""

    def __init__(self, session: Session):
        self.session = session
        self.flights: list[_InFlight] = []
        self.by_ticket: dict[int, _InFlight] = {}

    def step(self, runner: StepRunner) -> None:
        for task in runner.take_waiting():
            flight = _InFlight(task, task.batch, self.session.add(task.batch.requests))
            self.flights.append(flight)
            self.by_ticket.update((ticket, flight) for ticket in flight.tickets)
        for flight in self.flights:
            flight.widest = max(flight.widest, self.session.width)
        for ticket, result in self.session.step():
            flight = self.by_ticket.pop(ticket, None)
            if flight is None:  # a request cancelled while its result was on the way
                continue
            flight.results[ticket] = result
            if len(flight.results) < len(flight.tickets):
                self._cancel_if_decided(flight)
            if len(flight.results) == len(flight.tickets):
                self.flights.remove(flight)
                events = self.session.take_events(flight.tickets) if isinstance(self.session, SessionEvents) else None
                outcome = BatchOutcome(
                    results=[flight.results[t] for t in flight.tickets],
                    wall_seconds=time.perf_counter() - flight.sent,
                    events=event_records(events) if events is not None else None,
                    merged_size=flight.widest,
                )
                runner.deliver(flight.task, outcome)

    def _cancel_if_decided(self, flight: _InFlight) -> None:
        """Cancel the requests of `flight` still running once its batch says they cannot change it."""
        if flight.batch.decided is None:
            return
        if not flight.batch.decided([flight.results.get(ticket) for ticket in flight.tickets]):
            return
        rest = [ticket for ticket in flight.tickets if ticket not in flight.results]
        self.session.cancel(rest)
        for ticket in rest:
            self.by_ticket.pop(ticket, None)
            flight.results[ticket] = cancelled_result(flight.batch.requests[flight.tickets.index(ticket)], ticket)
