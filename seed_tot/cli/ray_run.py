"""A task run whose problems are searched on Ray actors (`--ray [ADDRESS]`); this process only
writes: every finished problem's trace and record, and each failed problem's line in failed.jsonl."""

from __future__ import annotations

import sys
import time
from functools import partial

import click
from tqdm import tqdm

from seed_tot.cli.run_config import RunConfig
from seed_tot.cli.run_executor import executor_spec
from seed_tot.cli.task_run import (
    keep_each,
    keep_problem,
    nothing_left,
    plan_run,
    print_run_totals,
    print_summary,
    problem_extra,
)
from seed_tot.records import append_failure


def run_task_on_ray(task_name: str, config: RunConfig) -> None:
    from seed_tot.distributed.ray_pool import solve_on_ray
    from seed_tot.distributed.work import Failed, SearchWork

    config, task, _, search_config, method_settings, todo, out, data_file = plan_run(task_name, config)
    if nothing_left(todo, out):
        return
    spec = executor_spec(config, method_settings)
    recorded = config.recorded()
    work = SearchWork(task, config.search, search_config, extras=partial(problem_extra, task_name, config.seed))
    actors: list[dict] = []

    def report(infos: list[dict]) -> None:
        actors.extend(infos)
        for info in infos:
            state = f"could not load: {info['error']}" if info.get("error") else (
                f"loaded {', '.join(info['models'].values())} ({info['dtype']}), peak RSS {info['peak_rss_mib']} MiB")
            click.echo(f"ray actor {info['worker'] or '?'}: {state}")

    problem_bar = tqdm(total=len(todo), desc=f"{task_name} ({config.method}, {config.search}, ray)", unit="problem",
                       file=sys.stderr)
    run_started = time.perf_counter()
    kept = {"finished": 0, "failed": 0}

    def keep(outcome) -> None:
        if isinstance(outcome, Failed):
            path = append_failure(out / "results.jsonl", outcome.problem.id, outcome.error, outcome.attempts,
                                  outcome.workers)
            kept["failed"] += 1
            tqdm.write(f"[{outcome.problem.id}] failed after {outcome.attempts} attempt(s): {outcome.error} "
                       f"(listed in {path}; --resume tries it again)", file=sys.stdout)
        else:
            outcome.trace.data_file = data_file  # the driver read the data file, not the actor
            outcome.trace.config["run"] = recorded  # and resolved the configuration
            keep_problem(task_name, config, out, outcome.result, outcome.trace, outcome.extra, run_started)
            kept["finished"] += 1

    outcomes = solve_on_ray(spec, work, todo, address=config.ray_address or None, actors=config.ray_actors,
                            cpus_per_actor=config.threads, concurrency=config.concurrency,
                            continuous=config.batching == "continuous", on_ready=report)
    interrupted = keep_each(outcomes, keep, problem_bar)
    finished, failed = kept["finished"], kept["failed"]
    print_summary(out)
    loaded = [info for info in actors if not info.get("error")]
    ray_totals = {"ray": {"address": config.ray_address or "default", "actors": len(loaded), "failed_problems": failed,
                          "actor_peak_rss_mib_at_load": [info["peak_rss_mib"] for info in loaded]}}
    print_run_totals(out, todo_done=finished, seconds=time.perf_counter() - run_started, config=config,
                     dtype=loaded[0]["dtype"] if loaded else config.dtype,
                     packed_layers=loaded[0]["packed_layers"] if loaded else 0, data_file=data_file,
                     extra_totals=ray_totals)
    if failed:
        click.echo(f"{failed} problem(s) failed: see {out / 'failed.jsonl'}; run again with --resume to retry them",
                   err=True)
    if interrupted:
        sys.exit(130)
