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

import sys
from pathlib import Path
from types import SimpleNamespace

import click

from seed_tot.analysis.chain_pool import collect_chains, missing_chains
from seed_tot.errors import SeedTotError
from seed_tot.observe.comparison.runs import problem_of, read_jsonl, trace_of
from seed_tot.search import BFSConfig, search_class
from seed_tot.task import select_problems
from seed_tot.training.value.rollout_engine import load_rollout_target, open_rollout_executor
from seed_tot.training.value.rollouts import POOL_FILE
from seed_tot_tasks import get_task

POOL_TARGET = "default-target"
IN_PROCESS = {"batched", "batched-lookup"}
SERVER = "llama-cpp"  # a pool only: llama.cpp's server on the target's own weights file


@click.command(help=__doc__.split("\n\n")[0])
@click.argument("run", type=click.Path(path_type=Path))
@click.option("--samples", type=int, default=4, show_default=True, help="sampled chains per problem in all (indices 1..N)")
@click.option("--per-call", type=int, default=8, show_default=True, help="problems per executor call")
@click.option("--dtype", default="auto", show_default=True, help="the run's --dtype (auto: as the CLI chooses)")
@click.option("--method", type=click.Choice(sorted(IN_PROCESS | {SERVER})), default=None,
              help="default: the run's own method when it is one of these (else batched); batched-lookup for a pool; "
                   "llama-cpp (pools only) samples with llama.cpp's server on the target's GGUF file")
@click.option("--task", default=None, help="a pool for problems without a tree run: the task of --start/--limit")
@click.option("--data", type=click.Path(path_type=Path), default=None,
              help="a pool's data file (default: the task's bundled test problems)")
@click.option("--start", type=int, default=0, show_default=True)
@click.option("--limit", type=int, default=None)
@click.option("--target", default=POOL_TARGET, show_default=True, help="the pool's target model (runs use their own)")
def main(**options) -> None:
    args = SimpleNamespace(**options)
    try:
        if args.method == SERVER and not args.task:
            raise SeedTotError("--method llama-cpp samples pools only (--task): a run's samples come from its own method.")
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


def generate(args, jobs, task, target_name: str) -> None:
    if not missing_chains(args.run / POOL_FILE, jobs, args.samples):
        print(f"nothing to add: every problem holds {args.samples} samples")
        return
    target = load_rollout_target(target_name, args.dtype, "llama-cpp" if args.method == SERVER else "in-process")
    if args.method == SERVER:
        rows = args.per_call * (args.samples + 1)
        executor, _, record = open_rollout_executor("llama-cpp", target_name, target, rows)
    else:
        from seed_tot.scheduling.factory import make_executor

        executor, record = make_executor(args.method, target, None), None
    try:
        collect_chains(args.run, task, jobs, args.samples, target, executor, args.per_call, args.method,
                       store_problem=jobs[0][2], progress=False, engine=record)
    finally:
        executor.close()
    print(f"done: `seed-tot report {args.run}` votes with the samples")


if __name__ == "__main__":
    main()
