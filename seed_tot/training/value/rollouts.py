"""Rollouts of the target: the chains of thought the self-consistency search samples for a problem
(the greedy chain and K samples), each problem's row appended to a pool file (cot_samples.jsonl) as
soon as it finishes, so an interrupted collection resumes with the problems it lacks. A pool is
what self-consistency would have sampled on those problems; each row records the settings that
produced it (target, dtype, executor, decoding, seed).
"""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path

from tqdm import tqdm

from seed_tot.errors import SeedTotError
from seed_tot.observe.trace import jsonable
from seed_tot.reasoning.prompting import PromptFormatter
from seed_tot.records import read_json_lines
from seed_tot.search.settings import SearchConfig
from seed_tot.training.value.rollout_engine import engine_settings

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
