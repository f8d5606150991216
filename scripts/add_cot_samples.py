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

import time
from pathlib import Path

import click

from seed_tot.cli.report import problem_of, trace_of
from seed_tot.models.loading import load_model
from seed_tot.reasoning.prompting import PromptFormatter
from seed_tot.records import append_json_lines, read_json_lines
from seed_tot.scheduling.factory import make_executor
from seed_tot.search import search_class
from seed_tot.search.base import cot_requests
from tasks import get_task


@click.command(help=__doc__)
@click.argument("run", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--samples", default=4, show_default=True)
@click.option("--per-call", default=8, show_default=True, help="problems per executor call")
@click.option("--dtype", default="auto", show_default=True, help="the run's --dtype (auto: as the CLI chooses)")
def main(run: Path, samples: int, per_call: int, dtype: str) -> None:
    traces = [trace_of(run, row) for row in read_json_lines(run / "results.jsonl")]
    if any(node.info.get("cot_sample") for trace in traces for node in trace.nodes):
        raise click.ClickException(f"{run} already holds sampled chains of thought (a --cot-samples run): nothing to add.")
    out_path = run / "cot_samples.jsonl"
    done = {row["problem_id"] for row in read_json_lines(out_path)}
    todo = [trace for trace in traces if trace.problem_id not in done]
    task = get_task(traces[0].task)
    bundled = {p.id: p for p in task.load()}
    target = load_model(traces[0].models["target"], dtype=dtype)
    formatter = PromptFormatter(target.tokenizer)
    executor = make_executor("batched", target, None)
    settings = {"samples": samples, "target": target.name, "dtype": str(target.dtype).removeprefix("torch."),
                "executor": "batched"}
    started = time.perf_counter()
    for first in range(0, len(todo), per_call):
        chunk = todo[first : first + per_call]
        per_trace = []
        for trace in chunk:
            config = search_class(trace.search).config_class(**{**trace.config["search"], "cot_samples": samples})
            prompt_ids = formatter.encode(task.cot_prompt(problem_of(trace, bundled)))
            per_trace.append(cot_requests(prompt_ids, config, trace.problem_id)[1:])
        results = executor.run([r for requests in per_trace for r in requests])
        rows = []
        for trace, requests in zip(chunk, per_trace, strict=True):
            mine, results = results[: len(requests)], results[len(requests) :]
            rows.append(sample_row(trace.problem_id, mine, settings))
        append_json_lines(out_path, rows)
        print(f"{len(done) + first + len(chunk)}/{len(traces)} problems, {time.perf_counter() - started:.0f} s",
              flush=True)
    print(f"done: `seed-tot report {run}` votes with the samples")


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
