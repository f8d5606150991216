"""Searches as coroutines: a search yields the batches it needs and is sent their outcomes.

A *step generator* yields `Batch`es and receives one `BatchOutcome` per batch; its return
value is its result. `drive` runs one step generator on an executor; `gather` runs several
as one step generator whose every batch merges all their pending batches, so many problems
(or a search and its chain-of-thought candidate) share one executor call per round.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Generator, TypeVar

from seed_tot.observe.metrics import event_records
from seed_tot.requests import Executor, GenerationRequest, GenerationResult

T = TypeVar("T")


@dataclass
class Batch:
    """Requests one search needs answered together (role and node say what they are for)."""

    role: str  # "thought", "value", "cot" or "merged"
    node_id: int
    requests: list[GenerationRequest]


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
    events = getattr(executor, "last_events", None)
    return BatchOutcome(
        results=results,
        wall_seconds=elapsed,
        events=event_records(events) if events is not None else None,
        merged_size=len(batch.requests),
    )


def drive(steps: Steps[T], executor: Executor) -> T:
    """Run a step generator to its end, one executor call per batch it yields."""
    try:
        batch = next(steps)
        while True:
            batch = steps.send(execute(executor, batch))
    except StopIteration as done:
        return done.value


@dataclass
class _Pending:
    steps: Steps[Any]
    batch: Batch | None = None
    done: bool = False
    value: Any = None


def _advance(item: _Pending, outcome: BatchOutcome | None) -> None:
    """Send `outcome` (None to start) and keep the next non-empty batch, or the return value."""
    try:
        batch = next(item.steps) if outcome is None else item.steps.send(outcome)
        while not batch.requests:  # nothing to run: answer at once
            batch = item.steps.send(BatchOutcome(results=[], wall_seconds=0.0))
        item.batch = batch
    except StopIteration as done:
        item.batch, item.done, item.value = None, True, done.value


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


@dataclass
class Group:
    """Step generators advancing together; new ones may join between rounds."""

    members: list[_Pending] = field(default_factory=list)

    def add(self, steps: Steps[Any]) -> _Pending:
        item = _Pending(steps)
        _advance(item, None)
        self.members.append(item)
        return item

    def running(self) -> list[_Pending]:
        return [m for m in self.members if not m.done]

    def pop_finished(self) -> list[Any]:
        """Return values of the members that have ended, removing them from the group."""
        finished = [m.value for m in self.members if m.done]
        self.members = [m for m in self.members if not m.done]
        return finished

    def merged_batch(self) -> tuple[Batch, list[_Pending]]:
        """One batch holding every running member's pending requests, in member order."""
        waiting = self.running()
        requests = [r for m in waiting for r in m.batch.requests]
        if len(waiting) == 1:
            return waiting[0].batch, waiting
        return Batch(role="merged", node_id=-1, requests=requests), waiting

    def deliver(self, outcome: BatchOutcome, waiting: list[_Pending]) -> None:
        for member, part in zip(waiting, split(outcome, [len(m.batch.requests) for m in waiting]), strict=True):
            _advance(member, part)


def gather(steps: list[Steps[Any]]) -> Steps[list[Any]]:
    """Run several step generators as one; returns their return values in order."""
    group = Group()
    items = [group.add(s) for s in steps]
    while group.running():
        batch, waiting = group.merged_batch()
        outcome = yield batch
        group.deliver(outcome, waiting)
    return [item.value for item in items]
