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

from typing import Callable, Iterable, Iterator

from seed_tot.requests import ContinuousBatching, Executor
from seed_tot.search.base import SearchResult
from seed_tot.search.flights import SessionFeeder
from seed_tot.search.steps import StepRunner, Steps, Task, run_round
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
    feeder = SessionFeeder(executor.session()) if continuous and isinstance(executor, ContinuousBatching) else None
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
            feed_step(feeder, runner)
        else:
            run_round(runner, executor)


def feed_step(feeder: SessionFeeder, runner: StepRunner) -> None:
    """Send every waiting batch into the session, step it once, and hand each search whose batch
    is done its outcome."""
    for task in runner.take_waiting():
        feeder.send(feeder.add(task))
    for flight in feeder.step():
        runner.deliver(flight.task, flight.outcome())
