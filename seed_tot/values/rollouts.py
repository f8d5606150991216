"""Rollouts of the target: the chains of thought a search samples for a problem, appended per call
to a pool file (cot_samples.jsonl) so an interrupted collection resumes where it stopped, and a
larger sample count later adds only the missing indices.

A chain's requests are exactly the ones the search sends (`cot_requests`: the greedy chain is
index 0, the samples 1..K, each with the seed of its problem and index), so a pool is what
self-consistency would have sampled on those problems. Each row records the settings that
produced it (target, dtype, executor, decoding, seed).
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from collections.abc import Callable
from pathlib import Path

from tqdm import tqdm

from seed_tot.errors import SeedTotError
from seed_tot.observe.comparison.pools import sample_indices  # the pool rows' format, read there too
from seed_tot.observe.trace import jsonable
from seed_tot.reasoning.prompting import PromptFormatter
from seed_tot.records import read_json_lines
from seed_tot.search.chains import cot_requests
from seed_tot.search.settings import SearchConfig
from seed_tot.values.rollout_engine import engine_settings

POOL_FILE = "cot_samples.jsonl"


def hold_output(out_path: Path):
    """The pool file, opened for appending and locked for this process's life: a second writer
    would read the same missing indices and append them twice."""
    out_path.parent.mkdir(parents=True, exist_ok=True)
    handle = out_path.open("a")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        raise SeedTotError(f"Another collection is writing {out_path}: wait for it, it resumes by itself.") from None
    return handle


def missing_chains(out_path: Path, jobs: list, samples: int) -> list:
    """(problem, config with cot_samples = samples, missing indices) for each job (problem, config,
    greedy wanted) whose chains the pool does not hold yet."""
    have: dict[str, set[int]] = {}
    for row in read_json_lines(out_path) if out_path.is_file() else []:
        have.setdefault(row["problem_id"], set()).update(sample_indices(row))
    todo = []
    for problem, config, greedy in jobs:
        wanted = ([0] if greedy else []) + list(range(1, samples + 1))
        missing = [i for i in wanted if i not in have.get(problem.id, set())]
        if missing:
            todo.append((problem, config.model_copy(update={"cot_samples": samples}), missing))
    return todo


def collect_chains(pool: Path, task, jobs: list, samples: int, target, executor, per_call: int,
                   method: str, store_problem: bool, progress: bool = True,
                   log: Callable[[str], None] = print, engine: dict | None = None) -> int:
    """Sample the pool's missing chains, `per_call` problems per executor call; returns the number of
    problems that got new chains. `target` is the loaded target model (its tokenizer formats prompts);
    `engine`: the server's record when a server samples the chains."""
    out_path = pool / POOL_FILE
    with hold_output(out_path):  # the lock lasts while this collection writes
        return _collect(out_path, task, jobs, samples, target, executor, per_call, method, store_problem, progress, log,
                        engine)


def _collect(out_path: Path, task, jobs, samples, target, executor, per_call, method, store_problem, progress, log,
             engine) -> int:
    todo = missing_chains(out_path, jobs, samples)
    if not todo:
        return 0
    formatter = PromptFormatter(target.tokenizer)
    config: SearchConfig = todo[0][1]
    settings = pool_settings(task, target, config, samples, method) | engine_settings(engine)
    started = time.perf_counter()
    bar = tqdm(total=len(todo), desc="rollouts", unit="problem", disable=not progress)
    for first in range(0, len(todo), per_call):
        chunk = todo[first : first + per_call]
        per_problem = []
        for problem, problem_config, missing in chunk:
            requests = cot_requests(formatter.encode(task.cot_prompt(problem)), problem_config, problem.id)
            per_problem.append([requests[i] for i in missing])
        results = executor.run([r for requests in per_problem for r in requests])
        with out_path.open("a") as handle:
            for (problem, _, missing), requests in zip(chunk, per_problem, strict=True):
                mine, results = results[: len(requests)], results[len(requests) :]
                handle.write(json.dumps(pool_row(problem, missing, mine, settings, store_problem)) + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        bar.update(len(chunk))
        log(f"{first + len(chunk)}/{len(todo)} problems, {time.perf_counter() - started:.0f} s")
    bar.close()
    return len(todo)


def pool_settings(task, target, config: SearchConfig, samples: int, method: str, **extra) -> dict:
    """What produced a pool's rows (stored in each row)."""
    return {"samples": samples, "target": target.name, "dtype": str(target.dtype).removeprefix("torch."),
            "executor": method, **extra, "task": task.name, "cot_decode": config.cot_decode.model_dump(mode="json"),
            "sample_temperature": config.thought_decode.temperature, "sample_top_p": config.thought_decode.top_p,
            "seed": config.seed}


# One chain in a pool row: (index, text, finish reason, generated tokens); index 0 is the greedy chain.
Chain = tuple[int, str, str | None, int]


def chains_row(problem, chains: list[Chain], settings: dict, store_problem: bool) -> dict:
    """One problem's chains as a pool row: the samples in order, the greedy chain (index 0) apart."""
    samples = [chain for chain in chains if chain[0] != 0]
    row = {
        "problem_id": problem.id,
        "samples": [text for _, text, _, _ in samples],
        "finish_reasons": [reason for _, _, reason, _ in samples],
        "sample_token_counts": [tokens for _, _, _, tokens in samples],
        "sample_indices": [index for index, _, _, _ in samples],
        "settings": settings,
    }
    if store_problem:
        row.update(question=problem.question, gold=jsonable(problem.gold), problem_meta=jsonable(problem.meta))
    greedy = next((chain for chain in chains if chain[0] == 0), None)
    if greedy is not None:
        row.update(greedy=greedy[1], greedy_finish_reason=greedy[2], greedy_token_count=greedy[3])
    return row


def pool_row(problem, indices: list[int], results, settings: dict, store_problem: bool) -> dict:
    """One problem's new chains from executor results, in the order of `indices`."""
    chains = [(i, r.text, r.finish_reason, len(r.token_ids)) for i, r in zip(indices, results, strict=True)]
    return chains_row(problem, chains, settings, store_problem)


def collect_rollouts(pool: Path, task, problems: list, samples: int, target, executor, method: str,
                     concurrency: int, seed: int = 0, progress: bool = True, engine: dict | None = None) -> int:
    """The greedy chain and `samples` sampled chains of every problem the pool lacks, sampled by the
    self-consistency search itself (the default thought settings), `concurrency` problems sharing
    the executor's continuous batch; each problem's row is appended as soon as it finishes.
    Returns the number of problems sampled."""
    from seed_tot.search.driver import solve_many
    from seed_tot.search.self_consistency import SelfConsistency

    out_path = pool / POOL_FILE
    with hold_output(out_path):
        have = {row["problem_id"] for row in read_json_lines(out_path)} if out_path.is_file() else set()
        todo = [problem for problem in problems if problem.id not in have]
        if not todo:
            return 0
        config = SearchConfig(cot_samples=samples, seed=seed)
        search = SelfConsistency(task, executor, PromptFormatter(target.tokenizer), config)
        settings = pool_settings(task, target, config, samples, method, concurrency=concurrency) | engine_settings(engine)
        bar = tqdm(total=len(todo), desc="rollouts", unit="problem", disable=not progress)
        with out_path.open("a") as handle:
            for result in solve_many(search.steps, todo, executor, concurrency, continuous=True):
                handle.write(json.dumps(tree_row(result, settings)) + "\n")
                handle.flush()
                os.fsync(handle.fileno())
                bar.update(1)
        bar.close()
        return len(todo)


def tree_row(result, settings: dict) -> dict:
    """A pool row from a self-consistency search's chains (the greedy one and the samples)."""
    chains = sorted((0 if node.info.get("cot") else node.info["cot_sample"], node.thought,
                     node.info.get("finish_reason"), node.generation.new_tokens)
                    for node in result.tree.nodes() if node.info.get("cot") or node.info.get("cot_sample"))
    return chains_row(result.problem, chains, settings, store_problem=True)
