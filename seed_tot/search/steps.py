"""Searches as coroutines: a search yields the batches it needs and is sent their outcomes.

A *step generator* yields `Batch`es and receives one `BatchOutcome` per batch; its return
value is its result. It may also yield a `Fork` of step generators (`gather`) and receives
their return values. A `StepRunner` keeps every generator in flight and collects the batches
that wait for an executor: `run_round` merges them into one executor call (a search and its
chain-of-thought candidate, or many problems, share the call); seed_tot/search/driver.py can
instead feed them to a continuous-batching session as they come.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Generator, TypeVar

from seed_tot.metrics import event_records
from seed_tot.requests import Executor, GenerationRequest, GenerationResult, RecordsEvents

T = TypeVar("T")


@dataclass
class Batch:
    """Requests one search needs answered together (role and node say what they are for)."""

    role: str  # "thought", "value", "cot" or "merged"
    node_id: int
    requests: list[GenerationRequest]
    # Given the results so far (None for a request still running), whether the rest can no longer
    # change what the batch is for: a continuous-batching driver then cancels them, and their
    # results come back with finish_reason "cancelled". Other drivers run every request.
    decided: Callable[[list[GenerationResult | None]], bool] | None = None


@dataclass
class BatchOutcome:
    """The results of a batch and the wall time of the executor call that produced them."""

    results: list[GenerationResult]
    wall_seconds: float
    events: list[dict] | None = None
    merged_size: int = 0  # requests in the executor call (more than the batch when merged)


Steps = Generator[Batch, BatchOutcome, T]


def execute(executor: Executor, batch: Batch) -> BatchOutcome:
    """One executor call for `batch`, timed."""
    started = time.perf_counter()
    results = executor.run(batch.requests)
    elapsed = time.perf_counter() - started
    if len(results) != len(batch.requests):
        raise RuntimeError(
            f"executor {getattr(executor, 'name', '?')} returned {len(results)} results "
            f"for {len(batch.requests)} requests"
        )
    events = executor.last_events if isinstance(executor, RecordsEvents) else None
    return BatchOutcome(
        results=results,
        wall_seconds=elapsed,
        events=event_records(events) if events is not None else None,
        merged_size=len(batch.requests),
    )


@dataclass
class Fork:
    """Yielded by a step generator: run these step generators side by side and send back the
    list of their return values (see `gather`)."""

    steps: list[Steps[Any]]


def gather(steps: list[Steps[Any]]) -> Steps[list[Any]]:
    """Inside a step generator, `values = yield from gather([...])` runs several step generators
    side by side (their batches share executor calls) and returns their values in order."""
    values = yield Fork(list(steps))
    return values


_START = object()


@dataclass(eq=False)
class Task:
    """One step generator in flight: waiting for its batch, for its forked children, or done."""

    steps: Steps[Any]
    parent: "Task | None" = None
    slot: int = 0  # its index in the parent's fork
    batch: Batch | None = None
    children_left: int = 0
    child_values: list[Any] = field(default_factory=list)
    done: bool = False
    value: Any = None


class StepRunner:
    """Step generators in flight, forks included; collects every batch that waits for an executor."""

    def __init__(self) -> None:
        self.waiting: list[Task] = []  # tasks whose batch has not been sent yet, in the order they asked

    def start(self, steps: Steps[T]) -> Task:
        task = Task(steps)
        self._resume(task, _START)
        return task

    def take_waiting(self) -> list[Task]:
        """The tasks whose batches wait to be sent (the list is emptied)."""
        waiting, self.waiting = self.waiting, []
        return waiting

    def deliver(self, task: Task, outcome: BatchOutcome) -> None:
        """Send a task the outcome of its batch; it runs on to its next batch, fork or end."""
        task.batch = None
        self._resume(task, outcome)

    def _resume(self, task: Task, sent: Any) -> None:
        try:
            item = next(task.steps) if sent is _START else task.steps.send(sent)
            while True:
                if isinstance(item, Fork) and not item.steps:
                    item = task.steps.send([])
                elif isinstance(item, Fork):
                    task.children_left, task.child_values = len(item.steps), [None] * len(item.steps)
                    for slot, child in enumerate(item.steps):
                        self._resume(Task(child, parent=task, slot=slot), _START)
                    return
                elif not item.requests:  # nothing to run: answer at once
                    item = task.steps.send(BatchOutcome(results=[], wall_seconds=0.0))
                else:
                    task.batch = item
                    self.waiting.append(task)
                    return
        except StopIteration as finished:
            task.done, task.value = True, finished.value
            parent = task.parent
            if parent is not None:
                parent.child_values[task.slot] = task.value
                parent.children_left -= 1
                if parent.children_left == 0:
                    self._resume(parent, parent.child_values)


def split(outcome: BatchOutcome, sizes: list[int]) -> list[BatchOutcome]:
    """The outcome of a merged call cut back into its parts (each keeps the call's wall time)."""
    parts, start = [], 0
    for size in sizes:
        parts.append(
            BatchOutcome(
                results=outcome.results[start : start + size],
                wall_seconds=outcome.wall_seconds,
                events=outcome.events,
                merged_size=outcome.merged_size,
            )
        )
        start += size
    return parts


def run_round(runner: StepRunner, executor: Executor) -> None:
    """ONE executor call for every waiting batch (merged), each task then sent its part."""
    waiting = runner.take_waiting()
    if not waiting:
        return
    batch = waiting[0].batch if len(waiting) == 1 else Batch(
        role="merged", node_id=-1, requests=[r for task in waiting for r in task.batch.requests])
    sizes = [len(task.batch.requests) for task in waiting]
    for task, part in zip(waiting, split(execute(executor, batch), sizes), strict=True):
        runner.deliver(task, part)


def drive(steps: Steps[T], executor: Executor) -> T:
    """Run a step generator to its end, one executor call per round of waiting batches."""
    runner = StepRunner()
    task = runner.start(steps)
    while not task.done:
        if not runner.waiting:
            raise RuntimeError("a step generator neither ended nor asked for a batch")
        run_round(runner, executor)
    return task.value
