"""Shared by the Ray tests: tiny-pair settings, the in-process reference, and a task that kills
the process searching chosen problems (a real SIGKILL of the Ray actor, from test code)."""

import os
import signal
from pathlib import Path

from seed_tot.config import DecodeConfig
from seed_tot.distributed.spec import ExecutorSpec, model_names, trace_settings
from seed_tot.distributed.work import SearchWork
from seed_tot.reasoning.prompting import PromptFormatter
from seed_tot.search import BFS, BFSConfig
from seed_tot.search.driver import solve_many
from seed_tot_tasks.gsm8k import Gsm8kTask

# Greedy, float32, short: a problem takes about a second on the tiny pair.
CONFIG = BFSConfig(
    n_thoughts=2, breadth=1, depth=2, value_samples=1, cot_candidate=False, seed=3,
    thought_decode=DecodeConfig(max_new_tokens=8, temperature=0.0),
    value_decode=DecodeConfig(max_new_tokens=6, temperature=0.0),
)
SPEC = ExecutorSpec(method="batched", target="tiny-target", dtype="float32", device="cpu", threads=1)


def problems(count: int, start: int = 0):
    return Gsm8kTask().load()[start:start + count]


def in_process(spec: ExecutorSpec, task, items, concurrency: int = 1):
    """{problem id: (result, trace)} from solve_many in this process: what the actors must match."""
    from seed_tot.api import to_trace

    executor, target, draft = spec.build()
    search = BFS(task, executor, PromptFormatter(target.tokenizer), CONFIG)
    try:
        return {r.problem.id: (r, to_trace(r, task, executor, model_names(target, draft),
                                           trace_settings(spec.method, target, spec.options)))
                for r in solve_many(search.steps, items, executor, concurrency)}
    finally:
        executor.close()


# The memory budget (its plan, and the KV-token bound and prefix cache it sets) depends on the
# machine's RAM and decides only which rows wait, never their tokens; Ray actors do not apply it.
MEMORY_PLAN = {"memory", "max_kv_tokens", "prefix_cache_mb"}
CLOCK_OR_SCHEDULE = {"wall_seconds", "tokens_per_second", "merged_size", "events", *MEMORY_PLAN}


def comparable(trace) -> dict:
    """A trace without what depends on the clock or on which problems shared an executor call."""
    def strip(value):
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if k not in CLOCK_OR_SCHEDULE}
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value

    return strip(trace.model_dump(mode="json"))


class SuddenDeathGsm8k(Gsm8kTask):
    """GSM8K whose thought prompt SIGKILLs its own process for `always` problems, and for `once`
    problems the first time only (a marker file in `marks` remembers the pid that died)."""

    def __init__(self, marks: str, once=(), always=()):
        self.marks, self.once, self.always = marks, set(once), set(always)

    def thought_prompt(self, problem, state, step, depth):
        marker = Path(self.marks) / f"{problem.id}.died"
        if problem.id in self.always or (problem.id in self.once and not marker.exists()):
            with marker.open("a") as handle:
                handle.write(f"{os.getpid()}\n")
            os.kill(os.getpid(), signal.SIGKILL)
        return super().thought_prompt(problem, state, step, depth)


def work(task) -> SearchWork:
    return SearchWork(task, "bfs", CONFIG)


class NodeRecordingGsm8k(Gsm8kTask):
    """GSM8K that notes, in `marks`, the Ray node each problem's first thought prompt was built on."""

    def __init__(self, marks: str):
        self.marks = marks

    def thought_prompt(self, problem, state, step, depth):
        import ray

        (Path(self.marks) / f"{problem.id}.node").write_text(ray.get_runtime_context().get_node_id())
        return super().thought_prompt(problem, state, step, depth)


class RaisingGsm8k(Gsm8kTask):
    """GSM8K whose thought prompt raises for the `bad` problems (a search error; the actor lives on)."""

    def __init__(self, bad=()):
        self.bad = set(bad)

    def thought_prompt(self, problem, state, step, depth):
        if problem.id in self.bad:
            raise ValueError(f"cannot build a prompt for {problem.id}")
        return super().thought_prompt(problem, state, step, depth)
