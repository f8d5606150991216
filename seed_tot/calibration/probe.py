"""Time one path: NEW_TOKENS decode steps of `width` sampled requests of one short prompt, decoded
plainly (no speculation), the prompt's prefill left out: in process by the batched executor in the
path's dtype, or by llama.cpp's server with one slot per request. Plain decoding on both sides compares
what the paths' kernels do at the run's width; speculation's gain depends on the text, which a
short probe cannot know."""

from __future__ import annotations

import gc
import time
from dataclasses import dataclass

from seed_tot.calibration.machine import machine_identity
from seed_tot.config import DecodeConfig
from seed_tot.reasoning.prompting import PromptFormatter
from seed_tot.machine_facts import OtherWork
from seed_tot.requests import Executor, GenerationRequest

# A made-up word problem (no data set's): the probe measures speed, not answers.
PROBE_MESSAGE = ("A baker fills 14 trays with 9 rolls each and sells 47 rolls before noon. "
                 "How many rolls are left? Think step by step.")
NEW_TOKENS = 8
ROUNDS = 3  # timed rounds per path at most, the fastest kept
QUIET_SHARE = 0.05  # other processes' share of the cores under which one round is enough
PROBE_METHOD = "batched"  # the in-process paths' plain batched decoding (a run uses its method's drafts on top)
SAMPLING = {"temperature": 0.7, "top_p": 0.95}  # the thoughts' and chains' sampling


@dataclass(frozen=True)
class RunPath:
    """One way to run the target: an in-process method in a dtype (int8 layers or not), or an engine."""

    method: str
    dtype: str | None = None  # None for an engine, which runs the file's own weights
    int8: bool = False

    @property
    def label(self) -> str:
        if self.dtype is None:
            return self.method
        return f"{self.method} {self.dtype}" + (" int8" if self.int8 else "")


@dataclass(frozen=True)
class Timing:
    path: RunPath
    tokens: int
    seconds: float
    load_seconds: float
    rounds: int = 1  # timed rounds (more where other work ran meanwhile), the fastest kept

    @property
    def tokens_per_second(self) -> float:
        return self.tokens / self.seconds if self.seconds > 0 else 0.0


def probe_requests(prompt_ids: list[int], width: int, new_tokens: int = NEW_TOKENS) -> list[GenerationRequest]:
    config = DecodeConfig(max_new_tokens=new_tokens, ignore_eos=True, **SAMPLING)
    return [GenerationRequest(prompt_ids, config, seed=i, request_id=f"probe-{i}", group="probe")
            for i in range(width)]


def time_executor(executor: Executor, prompt_ids: list[int], width: int, new_tokens: int = NEW_TOKENS,
                  rounds: int = ROUNDS) -> tuple[int, float, int]:
    """(new tokens, seconds, rounds timed) of `new_tokens` decode steps of `width` rows, the prompt's prefill left
    out: a first batch of one new token each fills the caches (and pays kernel set-up), then the
    same batch is timed with one new token and with new_tokens + 1, and the steps cost the difference.
    Where other processes held the cores during that round, it is repeated, up to `rounds` times, and
    each call's fastest time kept before the difference is taken: other work only ever slows a call
    down, so the fastest is the closest to what the path does (the fastest difference would instead
    keep a round whose short call alone was slowed). (llama.cpp keeps each slot's prompt; the
    in-process executors share one prompt across rows.)"""
    executor.run(probe_requests(prompt_ids, width, new_tokens=1))
    short, full, tokens, timed = float("inf"), float("inf"), 0, 0
    while timed < rounds:
        timed += 1
        other_work = OtherWork()
        short = min(short, timed_run(executor, probe_requests(prompt_ids, width, new_tokens=1))[1])
        results, seconds = timed_run(executor, probe_requests(prompt_ids, width, new_tokens + 1))
        full, tokens = min(full, seconds), sum(len(r.token_ids) for r in results) - width
        share = other_work.share(machine_identity()["cores"])
        if share is not None and share < QUIET_SHARE:
            break  # nothing else ran: another round would measure the same
    return tokens, max(full - short, 1e-6), timed


def timed_run(executor: Executor, requests: list[GenerationRequest]) -> tuple[list, float]:
    started = time.perf_counter()
    results = executor.run(requests)
    return results, time.perf_counter() - started


def time_in_process(target: str, path: RunPath, width: int, device: str = "cpu") -> Timing:
    from seed_tot.models.loading import load_model
    from seed_tot.runtime.packed_linear import return_freed_memory
    from seed_tot.scheduling.factory import make_executor

    started = time.perf_counter()
    runner = load_model(target, dtype=path.dtype, device=device, int8=path.int8)
    load_seconds = time.perf_counter() - started
    executor = make_executor(PROBE_METHOD, runner)
    try:
        prompt_ids = PromptFormatter(runner.tokenizer).encode(PROBE_MESSAGE)
        tokens, seconds, rounds = time_executor(executor, prompt_ids, width)
    finally:
        executor.close()
        del runner, executor
        gc.collect()
        return_freed_memory()  # else the next path loads beside this one's freed weights (8.6 GB peak)
    return Timing(path, tokens, seconds, load_seconds, rounds)


def time_engine(target: str, path: RunPath, width: int) -> Timing:
    from seed_tot.engines.setup import open_llama_cpp

    started = time.perf_counter()
    run = open_llama_cpp(target, slots=width)
    load_seconds = time.perf_counter() - started
    try:
        prompt_ids = PromptFormatter(run.tokenizer).encode(PROBE_MESSAGE)
        tokens, seconds, rounds = time_executor(run.executor, prompt_ids, width)
    finally:
        run.executor.close()
    return Timing(path, tokens, seconds, load_seconds, rounds)


def time_path(target: str, path: RunPath, width: int, device: str = "cpu") -> Timing:
    return time_engine(target, path, width) if path.dtype is None else time_in_process(target, path, width, device)
