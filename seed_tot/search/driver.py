"""Many problems at once: up to `concurrency` searches share every executor call.

Each round merges the pending batch of every running search (thoughts of one problem,
evaluations of another, a CoT candidate of a third) into ONE executor call; a finished
search leaves and the next problem joins before the next round, so the batch stays full.
Results do not depend on the concurrency: each request carries its own seed, and the
batched executors make a row's tokens independent of the other rows (tests/test_driver.py).
"""

from __future__ import annotations

from typing import Callable, Iterable, Iterator

from seed_tot.requests import Executor
from seed_tot.search.base import SearchResult
from seed_tot.search.steps import Group, Steps, execute
from seed_tot.task import Problem


def solve_many(
    steps_of: Callable[[Problem], Steps[SearchResult]],
    problems: Iterable[Problem],
    executor: Executor,
    concurrency: int = 1,
) -> Iterator[SearchResult]:
    """Search every problem with `steps_of(problem)`, up to `concurrency` at a time; yield each
    result as soon as its search ends (finishing order, which may differ from input order)."""
    if concurrency < 1:
        raise ValueError(f"concurrency must be at least 1 (got {concurrency})")
    queue = iter(problems)
    group = Group()
    exhausted = False
    while True:
        while not exhausted and len(group.running()) < concurrency:
            problem = next(queue, None)
            if problem is None:
                exhausted = True
            else:
                group.add(steps_of(problem))
        yield from group.pop_finished()
        if not group.running():
            if exhausted:
                return
            continue
        batch, waiting = group.merged_batch()
        group.deliver(execute(executor, batch), waiting)
