"""What a worker (a Ray actor) does: build its executor once, then search the problems it is sent
and hand back each finished one with its trace. Nothing here writes files: the driver alone does."""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator

from seed_tot.api import to_trace
from seed_tot.distributed.spec import ExecutorSpec, model_names, trace_settings
from seed_tot.errors import SeedTotError
from seed_tot.observe.trace import Trace
from seed_tot.machine_facts import peak_rss_mib
from seed_tot.reasoning.prompting import PromptFormatter
from seed_tot.requests import Executor
from seed_tot.search import SearchConfig, search_class
from seed_tot.search.base import SearchResult
from seed_tot.search.driver import solve_many
from seed_tot.task import Problem, Task

# extras(task, executor, formatter, result) -> dict: per-problem values computed where the
# executor lives (e.g. Creative Writing's coherency judge); they go to the record's `extra`.
Extras = Callable[[Task, Executor, PromptFormatter, SearchResult], dict]


@dataclass
class SearchWork:
    """Search each problem with `search` ("bfs", "mcts") and `config` over `task`."""

    task: Task
    search: str = "bfs"
    config: SearchConfig | None = None  # None: the search's default config
    extras: Extras | None = None


@dataclass
class Finished:
    """A problem searched to the end, its trace built where it ran."""

    problem: Problem
    result: SearchResult
    trace: Trace
    extra: dict = field(default_factory=dict)
    worker: str = ""  # host:pid of the process that solved it
    attempts: int = 1


@dataclass
class Failed:
    """A problem no worker could finish; `error` says why, in one sentence."""

    problem: Problem
    error: str
    attempts: int
    workers: list[str] = field(default_factory=list)


def worker_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


class ProblemSolver:
    """One executor and one search, kept for every problem this process is sent."""

    def __init__(self, spec: ExecutorSpec, work: SearchWork):
        self.spec = spec
        self.work = work
        self.executor, self.target, draft = spec.build()
        cls = search_class(work.search)
        self.search = cls(work.task, self.executor, PromptFormatter(self.target.tokenizer),
                          work.config if work.config is not None else cls.config_class())
        self.models = model_names(self.target, draft)
        self.settings = trace_settings(spec.method, self.target, spec.options)

    def info(self) -> dict[str, Any]:
        """Where this solver runs and what it loaded."""
        return {"worker": worker_name(), "models": self.models, "dtype": self.settings["dtype"],
                "packed_layers": self.target.packed_layers, "peak_rss_mib": round(peak_rss_mib())}

    def solve(self, problems: Iterable[Problem], concurrency: int = 1, continuous: bool = True) -> Iterator[Finished]:
        """Search `problems`, up to `concurrency` at once; yield each as soon as it ends."""
        for result in solve_many(self.search.steps, problems, self.executor, concurrency, continuous):
            yield self.finish(result)

    def finish(self, result: SearchResult) -> Finished:
        extra = self.work.extras(self.work.task, self.executor, self.search.formatter, result) if self.work.extras else {}
        trace = to_trace(result, self.work.task, self.executor, models=self.models, extra_config=self.settings)
        return Finished(result.problem, result, trace, extra, worker=worker_name())

    def close(self) -> None:
        self.executor.close()


def start_solver(spec: ExecutorSpec, work: SearchWork) -> tuple[ProblemSolver | None, str | None]:
    """(solver, None), or (None, the one-sentence reason) when a user-fixable error stops it loading."""
    try:
        return ProblemSolver(spec, work), None
    except SeedTotError as exc:
        return None, str(exc)
