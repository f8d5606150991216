"""Adding chains to a pool (scripts/add_cot_samples.py): the missing greedy chain and sample
indices of each problem, sampled with exactly the requests the search sends (`cot_requests`: the
greedy chain is index 0, the samples 1..K, each with the seed of its problem and index), appended
per executor call to the pool file, so an interrupted collection resumes where it stopped."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path

from tqdm import tqdm

from seed_tot.observe.comparison.pools import sample_indices
from seed_tot.reasoning.prompting import PromptFormatter
from seed_tot.records import read_json_lines
from seed_tot.search.chains import cot_requests
from seed_tot.search.settings import SearchConfig
from seed_tot.training.value.rollout_engine import engine_settings
from seed_tot.training.value.rollouts import POOL_FILE, chains_row, hold_output, pool_settings


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


def pool_row(problem, indices: list[int], results, settings: dict, store_problem: bool) -> dict:
    """One problem's new chains from executor results, in the order of `indices`."""
    chains = [(i, r.text, r.finish_reason, len(r.token_ids)) for i, r in zip(indices, results, strict=True)]
    return chains_row(problem, chains, settings, store_problem)
