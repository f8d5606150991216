"""Add sampled chains of thought to the trees of a finished run: what `--cot-samples K` would
have added, without searching the trees again. `seed-tot report RUN` then votes with them.

    python scripts/add_cot_samples.py runs/quality-gsm8k --samples 4 [--per-call 8] [--dtype bfloat16]

For every problem in RUN/results.jsonl it sends the sampled CoT requests the search itself
would send (`cot_requests`: same prompt, seeds and settings; the greedy one is already in the
trace), on the run's target with the batched executor, `--per-call` problems per executor
call. Each finished call appends its problems to RUN/cot_samples.jsonl (texts, finish reasons,
token counts and the settings that produced them), so an interrupted run resumes where it
stopped. In 16-bit dtypes the samples can differ slightly from a full run's: batch shapes
change the numerics.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from seed_tot.cli.report import problem_of, read_jsonl, trace_of
from seed_tot.models.loading import load_model
from seed_tot.reasoning.prompting import PromptFormatter
from seed_tot.scheduling.factory import make_executor
from seed_tot.search import search_class
from seed_tot.search.base import cot_requests
from tasks import get_task


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path)
    parser.add_argument("--samples", type=int, default=4)
    parser.add_argument("--per-call", type=int, default=8, help="problems per executor call")
    parser.add_argument("--dtype", default="auto", help="the run's --dtype (auto: as the CLI chooses)")
    args = parser.parse_args()
    traces = [trace_of(args.run, row) for row in read_jsonl(args.run / "results.jsonl")]
    if any(node.info.get("cot_sample") for trace in traces for node in trace.nodes):
        sys.exit(f"{args.run} already holds sampled chains of thought (a --cot-samples run): nothing to add.")
    out_path = args.run / "cot_samples.jsonl"
    done = {row["problem_id"] for row in read_jsonl(out_path)} if out_path.is_file() else set()
    todo = [trace for trace in traces if trace.problem_id not in done]
    task = get_task(traces[0].task)
    bundled = {p.id: p for p in task.load()}
    target = load_model(traces[0].models["target"], dtype=args.dtype)
    formatter = PromptFormatter(target.tokenizer)
    executor = make_executor("batched", target, None)
    settings = {"samples": args.samples, "target": target.name, "dtype": str(target.dtype).removeprefix("torch."),
                "executor": "batched"}
    started = time.perf_counter()
    for first in range(0, len(todo), args.per_call):
        chunk = todo[first : first + args.per_call]
        per_trace = []
        for trace in chunk:
            config = search_class(trace.search).config_class(**{**trace.config["search"], "cot_samples": args.samples})
            prompt_ids = formatter.encode(task.cot_prompt(problem_of(trace, bundled)))
            per_trace.append(cot_requests(prompt_ids, config, trace.problem_id)[1:])
        results = executor.run([r for requests in per_trace for r in requests])
        with out_path.open("a") as handle:
            for trace, requests in zip(chunk, per_trace, strict=True):
                mine, results = results[: len(requests)], results[len(requests) :]
                handle.write(json.dumps(sample_row(trace.problem_id, mine, settings)) + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        print(f"{len(done) + first + len(chunk)}/{len(traces)} problems, {time.perf_counter() - started:.0f} s",
              flush=True)
    print(f"done: `seed-tot report {args.run}` votes with the samples")


def sample_row(problem_id: str, results, settings: dict) -> dict:
    return {
        "problem_id": problem_id,
        "samples": [r.text for r in results],
        "finish_reasons": [r.finish_reason for r in results],
        "sample_token_counts": [len(r.token_ids) for r in results],
        "settings": settings,
    }


if __name__ == "__main__":
    main()
