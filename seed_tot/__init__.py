"""seed-tot: fast, lossless tree-of-thought reasoning with SEED scheduled speculative decoding.

The public API (imported lazily, so worker processes that import a submodule stay light):

    load_pair, load_model          models (alias, local dir, .gguf or hub id) -> ModelRunners
    make_executor                  "ar", "sd", "seed", ... -> an Executor
    METHODS, Method                every method's record: settings, defaults, what it can do
    BFS, MCTS, BFSConfig, MCTSConfig, SearchConfig, DecodeConfig
    solve(task, problem, executor, tokenizer, search="bfs", judge=None, **options) -> SearchResult
    LearnedJudge                   a trained value head bound to the target (value_mode="learned")
    SimpleTask, Problem            a task from two templates and a parser
    to_trace, write_trace, load_trace, tree_from_trace
    aggregate                      metrics of many problems
    solve_on_ray, ExecutorSpec, SearchWork   problems on Ray actors (docs/ray.md; pip install "seed-tot[ray]")

See docs/api.md.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_EXPORTS = {
    "load_pair": "seed_tot.models.loading",
    "load_model": "seed_tot.models.loading",
    "make_executor": "seed_tot.scheduling.factory",
    "METHODS": "seed_tot.scheduling.methods",
    "Method": "seed_tot.scheduling.methods",
    "DecodeConfig": "seed_tot.config",
    "SpeculationConfig": "seed_tot.config",
    "SearchConfig": "seed_tot.search.settings",
    "SearchResult": "seed_tot.search.base",
    "Search": "seed_tot.search.base",
    "BFS": "seed_tot.search.bfs",
    "BFSConfig": "seed_tot.search.bfs",
    "MCTS": "seed_tot.search.mcts",
    "MCTSConfig": "seed_tot.search.mcts",
    "ReasoningTree": "seed_tot.tree",
    "PromptFormatter": "seed_tot.reasoning.prompting",
    "SimpleTask": "seed_tot.reasoning.simple_task",
    "Problem": "seed_tot.task",
    "Task": "seed_tot.task",
    "solve": "seed_tot.api",
    "LearnedJudge": "seed_tot.values.judge",
    "to_trace": "seed_tot.api",
    "Trace": "seed_tot.observe.trace",
    "write_trace": "seed_tot.observe.trace",
    "load_trace": "seed_tot.observe.trace",
    "tree_from_trace": "seed_tot.observe.trace",
    "RunMetrics": "seed_tot.metrics",
    "aggregate": "seed_tot.metrics",
    "SeedTotError": "seed_tot.errors",
    "solve_on_ray": "seed_tot.distributed.ray_pool",
    "ExecutorSpec": "seed_tot.distributed.spec",
    "SearchWork": "seed_tot.distributed.work",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'seed_tot' has no attribute {name!r}")
    value = getattr(importlib.import_module(_EXPORTS[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
