"""Measure a CLLM checkpoint against its base model on held-out GSM8K questions, in one process.

For each question and each model (base, trained): the paper's convergence counts from fixed-block
Jacobi trajectories (load-independent), greedy AR and Jacobi decoding timed side by side (their
outputs must be equal: Jacobi is lossless), and the greedy CoT answer's correctness. Writes
results.json and results.md to --out with every setting and the load average.

    python scripts/cllm_measure.py --checkpoint PATH --rows 1-10 --out results/cllm_x
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import click
import torch

from seed_tot.fastcot_calibration import cot_prompt_ids
from seed_tot.config import DecodeConfig
from seed_tot.decoding.autoregressive import autoregressive_decode
from seed_tot.decoding.cllm import trained_runner
from seed_tot.decoding.jacobi import jacobi_decode
from seed_tot.models.loading import load_model
from seed_tot.training.cllm_metrics import summarize
from seed_tot.training.cllm_trajectory import collect_trajectories
from seed_tot_tasks.gsm8k import Gsm8kTask, extract_number_answer


def timed(decode) -> tuple[object, float]:
    started = time.perf_counter()
    out = decode()
    return out, time.perf_counter() - started


def measure_model(runner, ids: list[int], block_size: int, max_new_tokens: int, timing: bool) -> dict:
    config = DecodeConfig(max_new_tokens=max_new_tokens)
    blocks = collect_trajectories(runner, ids, block_size, max_new_tokens)
    row = {"blocks": [b.to_json() | {"context_ids": None} for b in blocks]}
    tokens = [t for b in blocks for t in b.fixed_point]
    row["text"] = runner.decode(tokens)
    if timing:
        ar, ar_s = timed(lambda: autoregressive_decode(runner, ids, config))
        jac, jac_s = timed(lambda: jacobi_decode(runner, ids, config, block_size=block_size))
        row |= {"ar_seconds": ar_s, "jacobi_seconds": jac_s, "jacobi_forwards": jac.stats.target_forwards,
                "new_tokens": len(ar.token_ids), "lossless": jac.token_ids == ar.token_ids == tokens}
    return row


@click.command()
@click.option("--base", default="default-draft", show_default=True)
@click.option("--checkpoint", required=True)
@click.option("--rows", default="1-10", show_default=True, help="1-based GSM8K test rows (held out: within 1-300).")
@click.option("--block-size", type=int, default=16, show_default=True)
@click.option("--max-new-tokens", type=int, default=256, show_default=True)
@click.option("--no-timing", is_flag=True, help="Only the trajectories (counts and answers).")
@click.option("--out", required=True)
def main(base, checkpoint, rows, block_size, max_new_tokens, no_timing, out):
    first, last = (int(x) for x in rows.split("-"))
    task = Gsm8kTask()
    problems = [p for p in task.load() if first <= p.meta["line"] <= last]
    base_runner = load_model(base, dtype="float32", device="cpu")
    models = {"base": base_runner, "cllm": trained_runner(base_runner, checkpoint)}
    out_dir = Path(out)
    out_dir.mkdir(parents=True, exist_ok=True)
    loads, results = [os.getloadavg()], []
    for problem in problems:
        ids = cot_prompt_ids(base_runner, problem.question)
        row = {"line": problem.meta["line"], "gold": problem.gold}
        for name, runner in models.items():
            measured = measure_model(runner, ids, block_size, max_new_tokens, not no_timing)
            answer = extract_number_answer(measured["text"])
            measured["correct"] = task.score(problem, answer) == 1.0
            measured["answer"] = answer
            row[name] = measured
        results.append(row)
        loads.append(os.getloadavg())
        print(json.dumps({"line": row["line"], **{n: {k: row[n].get(k) for k in ("correct", "ar_seconds", "jacobi_seconds", "lossless")} for n in models}}), flush=True)
    summary = {}
    from seed_tot.training.cllm_trajectory import BlockTrajectory

    for name in models:
        blocks = [BlockTrajectory.from_json(b | {"context_ids": []}) for r in results for b in r[name]["blocks"]]
        s = summarize(blocks) | {"accuracy": sum(r[name]["correct"] for r in results) / len(results), "n": len(results)}
        if not no_timing:
            ar = sum(r[name]["ar_seconds"] for r in results)
            jac = sum(r[name]["jacobi_seconds"] for r in results)
            toks = sum(r[name]["new_tokens"] for r in results)
            s |= {"ar_seconds": ar, "jacobi_seconds": jac, "speedup_over_ar": ar / jac,
                  "decoder_tokens_per_forward": toks / sum(r[name]["jacobi_forwards"] for r in results),
                  "all_lossless": all(r[name]["lossless"] for r in results)}
        summary[name] = s
    settings = {"base": base, "checkpoint": str(checkpoint), "rows": rows, "block_size": block_size,
                "max_new_tokens": max_new_tokens, "dtype": "float32", "threads": torch.get_num_threads(),
                "load_average_1_5_15_per_problem": loads}
    (out_dir / "results.json").write_text(json.dumps({"settings": settings, "summary": summary, "problems": results}, indent=1) + "\n")
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
