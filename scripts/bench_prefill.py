"""Prefill time of the value workload with and without prompt-prefix sharing.

Rebuilds the State Evaluator's prompts from the traces of a finished task run (the nodes each
BFS round evaluated, `--value-samples` requests per node as the evaluator sends them), merges
the rounds of `--problems` problems at a time as `--concurrency` does, and times the batched
executors' prefill of each merged round three ways, side by side, in one process:
  none       every request computes its prompt
  identical  identical prompts computed once (the k value samples of a node)
  prefix     identical once, and a common prefix of distinct prompts once (two-stage plan)
  cache      prefix, and prompts start from the KV kept from earlier rounds (the executors'
             LRU prefix cache, --cache-mb, as in a run: one cache over all rounds)

  python scripts/bench_prefill.py runs/quality-gsm8k --problems 4 --output results/bench_prefill.json
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import click
import torch

from seed_tot.models.loading import load_model
from seed_tot.reasoning.prompting import PromptFormatter
from seed_tot.records import read_stored_text, stored_files, write_text_atomically
from seed_tot.machine_facts import machine_facts
from seed_tot.scheduling.batched.prefill import prefill
from seed_tot.scheduling.prefix_cache import PrefixCache
from seed_tot.scheduling.prefix_plan import plan_cost, plan_prefix_sharing, stage_cost
from seed_tot.task import Problem
from seed_tot_tasks import get_task

MODES = {"none": (False, False), "identical": (True, False), "prefix": (True, True), "cache": (True, True)}


def value_rounds(trace_files: list[Path], problems: int, samples: int, formatter: PromptFormatter) -> list[list[list[int]]]:
    """Merged rounds: for each group of `problems` traces and each depth, every evaluated node's prompt x samples."""
    traces = [json.loads(read_stored_text(f)) for f in trace_files]
    rounds = []
    for start in range(0, len(traces), problems):
        by_depth: dict[int, list[list[int]]] = {}
        for trace in traces[start : start + problems]:
            task = get_task(trace["task"])
            problem = Problem(trace["problem_id"], trace["question"], trace["gold"])
            for node in trace["nodes"]:
                if node["depth"] > 0 and node.get("raw_values"):
                    ids = formatter.encode(task.value_prompt(problem, node["state"], node["depth"] - 1))
                    by_depth.setdefault(node["depth"], []).extend([ids] * samples)
        rounds.extend(by_depth[d] for d in sorted(by_depth))
    return rounds


def slots(prompts: list[list[int]], mode: str) -> int:
    """Slots the prefill computes in `mode` (rows x widest row per forward)."""
    if mode == "none":
        return stage_cost([len(p) for p in prompts])
    unique = [list(p) for p in dict.fromkeys(map(tuple, prompts))]
    plan = plan_prefix_sharing(unique) if mode == "prefix" else None
    return stage_cost([len(p) for p in unique]) if plan is None else plan_cost(unique, plan)


@click.command(help=__doc__)
@click.argument("run_dir", type=click.Path(file_okay=False, path_type=Path))
@click.option("--target", default="default-target", show_default=True)
@click.option("--dtype", default="bfloat16", show_default=True)
@click.option("--problems", default=4, show_default=True, help="problems merged per round (the run's --concurrency)")
@click.option("--value-samples", default=3, show_default=True)
@click.option("--limit-rounds", default=0, show_default=True, help="time only the first N merged rounds (0: all)")
@click.option("--threads", default=0, show_default=True)
@click.option("--cache-mb", default=1024.0, show_default=True, help="prefix cache budget of the cache mode")
@click.option("--output", type=click.Path(dir_okay=False, path_type=Path), default=None)
def main(run_dir: Path, target: str, dtype: str, problems: int, value_samples: int, limit_rounds: int, threads: int,
         cache_mb: float, output: Path | None) -> None:
    """RUN_DIR: a task run's --out folder (its traces/*.json are read, or traces/*.json.gz)."""
    if threads:
        torch.set_num_threads(threads)

    runner = load_model(target, dtype=dtype)
    files = stored_files(run_dir / "traces", "*.json", recursive=False)
    if not files:
        raise click.ClickException(f"No traces in {run_dir / 'traces'}: pass the --out folder of a finished task run.")
    rounds = value_rounds(files, problems, value_samples, PromptFormatter(runner.tokenizer))
    if limit_rounds:
        rounds = rounds[:limit_rounds]
    prefill(runner, rounds[0][:2], share_prefix=False)  # warm-up
    kept = PrefixCache(int(cache_mb * 2**20))
    totals: dict[str, dict[str, float]] = {mode: {} for mode in MODES}
    per_round = []
    for prompts in rounds:
        row = {"requests": len(prompts), "prompt_tokens": sum(map(len, prompts))}
        for mode, (share, common) in MODES.items():  # side by side, same round
            started = time.perf_counter()
            reused = kept.reused_tokens
            with torch.inference_mode():
                prefill(runner, prompts, share_prefix=share, common_prefixes=common,
                        prefix_cache=kept if mode == "cache" else None)
            row[mode] = {"seconds": time.perf_counter() - started}
            if mode == "cache":  # what it computes depends on what was kept: count the reuse instead
                row[mode]["reused_tokens"] = kept.reused_tokens - reused
            else:
                row[mode]["slots"] = slots(prompts, mode)
            for key, value in row[mode].items():
                totals[mode][key] = totals[mode].get(key, 0) + value
        per_round.append(row)
        print(json.dumps(row), flush=True)
    summary = {
        "command": " ".join(sys.argv),
        "target": target,
        "dtype": dtype,
        "threads": torch.get_num_threads(),
        "traces": len(files),
        "rounds": len(rounds),
        "totals": totals,
        "speedup_identical_vs_none": totals["none"]["seconds"] / totals["identical"]["seconds"],
        "speedup_prefix_vs_none": totals["none"]["seconds"] / totals["prefix"]["seconds"],
        "speedup_prefix_vs_identical": totals["identical"]["seconds"] / totals["prefix"]["seconds"],
        "speedup_cache_vs_none": totals["none"]["seconds"] / totals["cache"]["seconds"],
        "speedup_cache_vs_prefix": totals["prefix"]["seconds"] / totals["cache"]["seconds"],
        "machine": machine_facts(),
        "per_round": per_round,
    }
    print(json.dumps({k: v for k, v in summary.items() if k != "per_round"}, indent=1))
    if output:
        write_text_atomically(output, json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
