"""Sampled chains of thought for the problems of a run, or a pool of chains for problems no tree
has searched yet. `seed-tot report RUN [RUN...]` votes with them and draws self-consistency
against the trees at matched tokens.

    python scripts/add_cot_samples.py runs/quality-gsm8k --samples 4 [--per-call 8] [--dtype bfloat16]
    python scripts/add_cot_samples.py POOL --task gsm8k --start 42 --limit 58 --samples 8

With a finished run (RUN/results.jsonl) it sends, for every problem, the sampled CoT requests
the search itself would send (`cot_requests`: same prompt, seeds and settings; the greedy one is
already in the trace). With --task (a pool: POOL holds no tree run) it sends the greedy chain
too and stores each problem's question and gold answer beside its chains. Problems go
`--per-call` at a time to one executor call; each finished call appends its problems to
cot_samples.jsonl (texts, finish reasons, token counts, sample indices and the settings that
produced them), so an interrupted run resumes where it stopped, and a larger --samples later
adds only the missing indices (a second row per problem; the report joins them). In 16-bit
dtypes the samples can differ slightly from a full run's: batch shapes change the numerics.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import sys
import time
from pathlib import Path

from seed_tot.cli.run_report import problem_of, read_jsonl, sample_indices, trace_of
from seed_tot.errors import SeedTotError
from seed_tot.models.loading import load_model
from seed_tot.observe.trace import jsonable
from seed_tot.reasoning.prompting import PromptFormatter
from seed_tot.cli.task_run import select_problems
from seed_tot.scheduling.factory import make_executor
from seed_tot.search import BFSConfig, search_class
from seed_tot.search.base import cot_requests
from tasks import get_task

POOL_TARGET = "default-target"
IN_PROCESS = {"batched", "batched-lookup"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path)
    parser.add_argument("--samples", type=int, default=4, help="sampled chains per problem in all (indices 1..N)")
    parser.add_argument("--per-call", type=int, default=8, help="problems per executor call")
    parser.add_argument("--dtype", default="auto", help="the run's --dtype (auto: as the CLI chooses)")
    parser.add_argument("--method", choices=sorted(IN_PROCESS), help="default: the run's own method when it is "
                        "one of these (else batched); batched-lookup for a pool")
    parser.add_argument("--task", help="a pool for problems without a tree run: the task of --start/--limit")
    parser.add_argument("--data", type=Path, help="a pool's data file (default: the task's bundled test problems)")
    parser.add_argument("--start", type=int, default=0)
    parser.add_argument("--limit", type=int)
    parser.add_argument("--target", default=POOL_TARGET, help="the pool's target model (runs use their own)")
    args = parser.parse_args()
    try:
        jobs, task, target_name = pool_jobs(args) if args.task else run_jobs(args)
        generate(args, jobs, task, target_name)
    except SeedTotError as error:
        sys.exit(str(error))


def run_jobs(args):
    """(problem, config, greedy wanted) for the problems of a finished run."""
    results = args.run / "results.jsonl"
    if not results.is_file():
        raise SeedTotError(f"{args.run} holds no results.jsonl: give a run's --out folder, or --task for a pool.")
    traces = [trace_of(args.run, row) for row in read_jsonl(results)]
    if any(node.info.get("cot_sample") for trace in traces for node in trace.nodes):
        raise SeedTotError(f"{args.run} already holds sampled chains of thought (a --cot-samples run): nothing to add.")
    task = get_task(traces[0].task)
    bundled = {p.id: p for p in task.load()}
    jobs = [(problem_of(trace, bundled), search_class(trace.search).config_class(**trace.config["search"]), False)
            for trace in traces]
    if args.method is None:
        method = traces[0].config.get("method", traces[0].executor)
        args.method = method if method in IN_PROCESS else "batched"
    return jobs, task, traces[0].models["target"]


def pool_jobs(args):
    """(problem, default search config, greedy wanted) for --task --start --limit."""
    if (args.run / "results.jsonl").is_file():
        raise SeedTotError(f"{args.run} holds a tree run: leave out --task to add samples to it.")
    task = get_task(args.task)
    problems = select_problems(task.load(args.data), args.start, args.limit)
    args.method = args.method or "batched-lookup"
    return [(problem, BFSConfig(), True) for problem in problems], task, args.target


def hold_output(out_path: Path):
    """The output file, opened for appending and locked for this process's life: a second writer
    would read the same missing indices and append them twice."""
    out_path.parent.mkdir(parents=True, exist_ok=True)
    handle = out_path.open("a")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        raise SeedTotError(f"Another add_cot_samples.py is writing {out_path}: wait for it, it resumes by itself.") from None
    return handle


def generate(args, jobs, task, target_name: str) -> None:
    out_path = args.run / "cot_samples.jsonl"
    lock = hold_output(out_path)  # noqa: F841 (held until the process ends)
    have: dict[str, set[int]] = {}
    for row in read_jsonl(out_path) if out_path.is_file() else []:
        have.setdefault(row["problem_id"], set()).update(sample_indices(row))
    pool = jobs[0][2]
    todo = []
    for problem, config, greedy in jobs:
        wanted = ([0] if greedy else []) + list(range(1, args.samples + 1))
        missing = [i for i in wanted if i not in have.get(problem.id, set())]
        if missing:
            todo.append((problem, config.model_copy(update={"cot_samples": args.samples}), missing))
    if not todo:
        print(f"nothing to add: every problem holds {args.samples} samples")
        return
    target = load_model(target_name, dtype=args.dtype)
    formatter = PromptFormatter(target.tokenizer)
    executor = make_executor(args.method, target, None)
    settings = {"samples": args.samples, "target": target.name, "dtype": str(target.dtype).removeprefix("torch."),
                "executor": args.method, "task": task.name,
                "cot_decode": todo[0][1].cot_decode.model_dump(mode="json"),
                "sample_temperature": todo[0][1].thought_decode.temperature,
                "sample_top_p": todo[0][1].thought_decode.top_p, "seed": todo[0][1].seed}
    started = time.perf_counter()
    for first in range(0, len(todo), args.per_call):
        chunk = todo[first : first + args.per_call]
        per_problem = []
        for problem, config, missing in chunk:
            requests = cot_requests(formatter.encode(task.cot_prompt(problem)), config, problem.id)
            per_problem.append([requests[i] for i in missing])
        results = executor.run([r for requests in per_problem for r in requests])
        with out_path.open("a") as handle:
            for (problem, _, missing), requests in zip(chunk, per_problem, strict=True):
                mine, results = results[: len(requests)], results[len(requests) :]
                handle.write(json.dumps(sample_row(problem, missing, mine, settings, pool)) + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        print(f"{first + len(chunk)}/{len(todo)} problems, {time.perf_counter() - started:.0f} s", flush=True)
    print(f"done: `seed-tot report {args.run}` votes with the samples")


def sample_row(problem, indices: list[int], results, settings: dict, pool: bool) -> dict:
    """One problem's new chains; index 0 (the greedy chain, pools only) is kept apart from the samples."""
    by_index = dict(zip(indices, results, strict=True))
    greedy = by_index.pop(0, None)
    row = {
        "problem_id": problem.id,
        "samples": [r.text for r in by_index.values()],
        "finish_reasons": [r.finish_reason for r in by_index.values()],
        "sample_token_counts": [len(r.token_ids) for r in by_index.values()],
        "sample_indices": list(by_index),
        "settings": settings,
    }
    if pool:
        row.update(question=problem.question, gold=jsonable(problem.gold), problem_meta=jsonable(problem.meta))
    if greedy is not None:
        row.update(greedy=greedy.text, greedy_finish_reason=greedy.finish_reason, greedy_token_count=len(greedy.token_ids))
    return row


if __name__ == "__main__":
    main()
