"""One task run from the CLI: resolve and check its configuration, load models, search every
problem, keep every finished problem (results.jsonl + one trace each), print a summary."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any, Callable, Iterable, NamedTuple

import click
from tqdm import tqdm

from seed_tot.cli.resume import check_resume
from seed_tot.cli.run_checks import check_config
from seed_tot.cli.run_config import RunConfig, resolve_config, search_settings
from seed_tot.cli.run_executor import check_memory_before_loading, load_executor, longest_chain_request
from seed_tot.errors import ConfigError, SeedTotError
from seed_tot.records import (
    ProblemRecord,
    append_json_lines,
    append_record,
    finished_ids,
    load_records,
    portable_path,
    summarize,
)
from seed_tot.reasoning.answer_judge import judge_answer
from seed_tot.scheduling.methods import AUTO
from seed_tot.scheduling.progress import ProgressExecutor
from seed_tot.task import select_problems


def output_dir(task_name: str, config: RunConfig) -> Path:
    out = Path(config.out_dir) if config.out_dir else Path("runs") / f"{task_name}-{config.method}"
    results = out / "results.jsonl"
    if results.is_file() and results.stat().st_size > 0 and not config.resume:
        raise SeedTotError(
            f"{results} already holds results: pass --resume to continue that run, or choose another --out."
        )
    return out


def problem_extra(task_name: str, seed: int, task, executor, formatter, result) -> dict:
    """The record's task-specific extras, computed where the executor is: the task's judge of the
    answer (if it has one), the answers voted on."""
    extra = judge_answer(task, executor, formatter, result.answer or "", seed)
    if result.selection is not None:
        extra["cot_answer"] = result.selection.cot_answer
        extra["search_answer"] = result.selection.search_answer
    return extra


def keep_problem(task_name: str, config: RunConfig, out: Path, result, trace, extra: dict, run_started: float) -> None:
    """Write the problem's trace (atomically) and append its record (fsynced), then print one line."""
    from seed_tot.observe.trace import write_trace

    problem = result.problem
    trace_path = write_trace(out / "traces" / f"{problem.id}.json", trace)
    record = _record(task_name, config, result, trace_path, extra)
    record.finished_after_s = round(time.perf_counter() - run_started, 2)
    append_record(out / "results.jsonl", record)
    verdict = {True: "correct", False: "wrong", None: f"score {record.score:.2f}"}[result.correct]
    tqdm.write(
        f"[{problem.id}] answer={result.answer!r} gold={problem.gold!r} {verdict} | "
        f"{record.new_tokens} tokens, {record.wall_seconds:.1f} s in executor calls "
        f"({record.finished_after_s:.1f} s since start) | trace {trace_path}",
        file=sys.stdout,
    )


def _record(task_name, config: RunConfig, result, trace_path, extra) -> ProblemRecord:
    m = result.metrics
    return ProblemRecord(
        problem_id=result.problem.id,
        method=config.method,
        answer=result.answer,
        gold=str(result.problem.gold),
        score=float(result.score or 0.0),
        correct=bool(result.correct),
        new_tokens=m.new_tokens,
        wall_seconds=m.wall_seconds,
        tokens_per_second=m.tokens_per_second or 0.0,
        acceptance_rate=m.acceptance_rate,
        target_forwards=m.target_forwards,
        draft_forwards=m.draft_forwards,
        parse_failures=m.parse_failures,
        trace_path=portable_path(trace_path),  # relative to the working directory where it lies below it
        extra=extra,
    )


def note_interrupt() -> bool:
    """Say what Ctrl-C during a run keeps (every finished problem is already on disk)."""
    click.echo("\ninterrupted: every finished problem is saved; continue with --resume", err=True)
    return True


def keep_each(outcomes: Iterable, keep: Callable[[Any], None], problem_bar: tqdm, *closing) -> bool:
    """The run loop of every CLI run (in process or on Ray): keep each problem's outcome as it
    finishes, one step of the bar each, until all are kept or Ctrl-C; then close the bar and
    `closing` (bars, executors). Returns whether Ctrl-C ended it."""
    try:
        for outcome in outcomes:
            keep(outcome)
            problem_bar.update(1)
    except KeyboardInterrupt:
        return note_interrupt()
    finally:
        for thing in (*closing, problem_bar):
            thing.close()
    return False


def print_summary(out: Path) -> None:
    """Accuracy, tokens and acceptance over every problem recorded in OUT/results.jsonl."""
    s = summarize(load_records(out / "results.jsonl"))
    if not s["problems"]:
        click.echo("no problem finished")
        return
    rate = "n/a" if s["acceptance_rate"] is None else f"{s['acceptance_rate']:.1%}"
    click.echo("")
    # No speed here: under --concurrency the problems' executor seconds overlap; the run's own
    # clock (print_run_totals) gives the one speed to compare.
    click.echo("| problems | accuracy | score | tokens | acceptance | parse failures |")
    click.echo("|---|---|---|---|---|---|")
    click.echo(
        f"| {s['problems']} | {s['accuracy']:.1%} | {s['score']:.3f} | {s['new_tokens']} | {rate} | {s['parse_failures']} |"
    )
    click.echo(f"results: {out / 'results.jsonl'}")


def print_run_totals(
    out: Path, todo_done: int, seconds: float, config: RunConfig, dtype: str, work: dict | None = None,
    packed_layers: int = 0, data_file: dict | None = None, extra_totals: dict | None = None, memory: dict | None = None,
    worker_peaks_mib: list[float] | None = None,
) -> None:
    """This invocation's wall time, tokens/s over the run and peak RSS (under --concurrency the
    per-problem seconds above overlap, so the run's own clock is the throughput to compare), with
    the draft worker processes' peaks where the method has them; appended to OUT/runs.jsonl."""
    from seed_tot.machine_facts import cpu_facts, peak_rss_mib

    records = load_records(out / "results.jsonl")[-todo_done:] if todo_done else []
    tokens = sum(r.new_tokens for r in records)
    totals = {
        "problems": todo_done, "concurrency": config.concurrency, "batching": config.batching,
        "method": config.method, "method_options": list(config.method_options), "dtype": dtype,
        "packed_linear_layers": packed_layers, "wall_seconds": round(seconds, 2),  # the precision of finished_after_s
        "new_tokens": tokens, "tokens_per_second": round(tokens / seconds, 2) if seconds > 0 else 0.0,
        "peak_rss_mib": round(peak_rss_mib()), "cpu": cpu_facts(),  # the machine the speed was measured on
        **({"peak_rss_workers_mib": worker_peaks_mib} if worker_peaks_mib else {}),
        **({"memory": memory} if memory else {}),
        **({"data_file": data_file} if data_file else {}),
        **({"session_work": work} if work else {}),
        **(extra_totals or {}),
    }
    click.echo(f"speed: {totals['tokens_per_second']} tokens/s over the run ({tokens} tokens, {todo_done} problems "
               f"in {seconds:.1f} s of wall time), peak RSS {totals['peak_rss_mib']} MiB"
               + (f" + {sum(worker_peaks_mib):.0f} MiB in {len(worker_peaks_mib)} draft worker processes"
                  if worker_peaks_mib else "")
               + (f" of a {memory['budget_bytes'] // 2**20} MiB budget" if memory else ""))
    if "judge" in totals:
        click.echo(f"judge: {totals['judge']['seconds']} s reading {totals['judge']['tokens_read']} token positions "
                   "(part of the wall time above)")
    append_json_lines(out / "runs.jsonl", [totals])


class RunSetup(NamedTuple):
    """A run's configuration resolved and checked, its task, its search and the method's settings."""

    config: RunConfig
    task: Any
    search_cls: type
    search_config: Any
    method_settings: dict


class RunPlan(NamedTuple):
    """A checked run: its setup, the problems still to do, where it writes, the data file read."""

    config: RunConfig
    task: Any
    search_cls: type
    search_config: Any
    method_settings: dict
    todo: list
    out: Path
    data_file: dict


def set_up_run(task_name: str, config: RunConfig, measure: bool = False) -> RunSetup:
    """Resolve the configuration once and check it, before any data file is read or any model
    loads (but for the one-time timing of --method auto's paths, where `measure`)."""
    from seed_tot.search import search_class
    from seed_tot_tasks import get_task

    task = get_task(task_name)
    config = resolve_config(config, task, measure=measure)
    method_settings = check_config(config, task)
    search_cls = search_class(config.search)
    try:
        search_config = search_cls.config_class(**search_settings(config, task))
    except ValueError as exc:
        raise ConfigError(f"Bad search settings: {str(exc).splitlines()[-1]}.") from None
    search_cls.check(task, search_config)
    return RunSetup(config, task, search_cls, search_config, method_settings)


def print_config(task_name: str, config: RunConfig) -> None:
    """--print-config: the resolved configuration as JSON (--config reads it back); no model loads."""
    click.echo(set_up_run(task_name, config).config.model_dump_json(indent=2))


def plan_run(task_name: str, config: RunConfig, measure: bool = False) -> RunPlan:
    """Check every setting and pick the problems still to do, before any model loads (`measure`:
    see set_up_run)."""
    from seed_tot_tasks.base import data_file_record

    config, task, search_cls, search_config, method_settings = set_up_run(task_name, config, measure)
    if config.method_info.in_process:
        check_memory_before_loading(config, method_settings)
    ids = tuple(i.strip() for i in config.ids.split(",") if i.strip()) if config.ids else ()
    problems = select_problems(task.load(config.data_path), config.start, config.limit, ids)
    data_file = data_file_record(Path(config.data_path) if config.data_path else task.default_data_path)
    out = output_dir(task_name, config)
    done = finished_ids(out / "results.jsonl") if config.resume else set()
    if done:
        check_resume(out, resume_settings(task, search_cls, search_config, config))
    todo = [p for p in problems if p.id not in done]
    if done:
        click.echo(f"resuming: {len(problems) - len(todo)} of {len(problems)} problems already done")
    return RunPlan(config, task, search_cls, search_config, method_settings, todo, out, data_file)


def resume_settings(task, search_cls, search_config, config: RunConfig) -> dict[str, Any]:
    """What a resumed run must share with the run it continues (seed_tot/cli/resume.py); an engine's
    model comes from the engine, so only an in-process method names its target."""
    from seed_tot.observe.trace import jsonable

    target = config.target_name if config.method_info.in_process else None
    return {"task": task.name, "search": search_cls.name, "target": target,
            "search_config": jsonable(search_config.model_dump(mode="json"))}


def nothing_left(todo: list, out: Path) -> bool:
    """True, after the summary of what is already there, when a resumed run has no problem left (no model loads)."""
    if todo:
        return False
    click.echo("nothing left to run: every selected problem is already in results.jsonl")
    print_summary(out)
    return True


def needs_measurement(given: RunConfig, resolved: RunConfig) -> bool:
    """Whether "auto" was left to the CPU-flags rule only because no measurement is cached yet."""
    from seed_tot.cli.run_config import measured_auto_applies

    return given.method == AUTO and resolved.auto_choice is None and measured_auto_applies(resolved)


def run_task(task_name: str, config: RunConfig) -> None:
    from seed_tot.api import to_trace
    from seed_tot.reasoning.prompting import PromptFormatter
    from seed_tot.search.driver import solve_many

    plan = plan_run(task_name, config)  # every check and the data, before any path is timed
    if nothing_left(plan.todo, plan.out):
        return
    if needs_measurement(config, plan.config):  # --method auto, first run of this target here
        plan = plan_run(task_name, config, measure=True)
    config, task, search_cls, search_config, method_settings, todo, out, data_file = plan
    if config.auto_choice is not None:
        click.echo(config.auto_choice["line"], err=True)
    longest = longest_chain_request(task, todo, search_cls, search_config, config.target_name) \
        if config.method_info.engine else None
    loaded = load_executor(config, method_settings, longest)
    extra_config = {**loaded.trace_config, "run": config.recorded()}
    dtype = extra_config["dtype"]  # what --dtype auto resolved to on this machine
    formatter = PromptFormatter(loaded.tokenizer)
    if config.value_mode == "logits":
        from seed_tot.reasoning.evaluator import verdict_tokens

        verdict_tokens(task, formatter)  # refuses verdict words this tokenizer cannot tell apart, before any search
    judge = None
    if config.value_mode == "learned":
        from seed_tot.values.judge import judge_record, judge_totals, load_judge

        judge = load_judge(loaded.target, config.target_name, config.dtype, config.device, config.value_model)
        extra_config["value_head"] = judge_record(judge, config.value_model)
    search = search_cls(task, loaded.executor, formatter, search_config, judge=judge)
    problem_bar = tqdm(total=len(todo), desc=f"{task_name} ({config.method}, {config.search})", unit="problem",
                       file=sys.stderr)
    batch_bar = tqdm(desc="requests", unit="request", file=sys.stderr, leave=False)
    executor = ProgressExecutor(loaded.executor, batch_bar)
    run_started = time.perf_counter()

    def keep(result) -> None:
        extra = problem_extra(task_name, config.seed, task, executor, formatter, result)
        trace = to_trace(result, task, executor, models=loaded.models, extra_config=extra_config, data_file=data_file)
        keep_problem(task_name, config, out, result, trace, extra, run_started)

    results = solve_many(search.steps, todo, executor, config.concurrency, continuous=config.batching == "continuous")
    interrupted = keep_each(results, keep, problem_bar, batch_bar, executor)
    print_summary(out)
    work = getattr(executor, "work", None)  # sessions' prefill/decode split (executors with sessions)
    print_run_totals(out, todo_done=problem_bar.n, seconds=time.perf_counter() - run_started, config=config,
                     dtype=dtype, work=work.as_dict() if work is not None else None,
                     packed_layers=loaded.packed_layers, data_file=data_file, memory=loaded.memory,
                     worker_peaks_mib=getattr(executor, "worker_peak_rss_mib", None),
                     extra_totals={"judge": judge_totals(judge)} if judge is not None else None)
    if interrupted:
        sys.exit(130)
