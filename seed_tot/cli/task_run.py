"""One task run from the CLI: check the settings, load models, search every problem, keep
every finished problem (results.jsonl + one trace each), print a summary."""

from __future__ import annotations

import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, NamedTuple

import click
from tqdm import tqdm

from seed_tot.cli.resume import check_resume
from seed_tot.cli.run_config import (  # noqa: F401 (re-exported: ray_run, the API server)
    TaskRunOptions,
    _check_numbers,
    executor_options,
    parse_method_option,
    search_settings,
    target_name,
    with_task_defaults,
)
from seed_tot.cli.run_executor import (  # noqa: F401 (re-exported: ray_run, the API server)
    check_memory_before_loading,
    executor_spec,
    open_engine,
    within_memory_budget,
)
from seed_tot.errors import ConfigError, SeedTotError
from seed_tot.records import (
    ProblemRecord,
    append_json_lines,
    append_record,
    finished_ids,
    load_records,
    summarize,
)
from seed_tot.reasoning.judge import judge_answer
from seed_tot.scheduling.progress import ProgressExecutor


def output_dir(task_name: str, opts: TaskRunOptions) -> Path:
    out = Path(opts.out_dir) if opts.out_dir else Path("runs") / f"{task_name}-{opts.method}"
    results = out / "results.jsonl"
    if results.is_file() and results.stat().st_size > 0 and not opts.resume:
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


def keep_problem(task_name: str, opts: TaskRunOptions, out: Path, result, trace, extra: dict, run_started: float) -> None:
    """Write the problem's trace (atomically) and append its record (fsynced), then print one line."""
    from seed_tot.observe.trace import write_trace

    problem = result.problem
    trace_path = write_trace(out / "traces" / f"{problem.id}.json", trace)
    record = _record(task_name, opts, result, trace_path, extra)
    append_record(out / "results.jsonl", record)
    verdict = {True: "correct", False: "wrong", None: f"score {record.score:.2f}"}[result.correct]
    tqdm.write(
        f"[{problem.id}] answer={result.answer!r} gold={problem.gold!r} {verdict} | "
        f"{record.new_tokens} tokens, {record.wall_seconds:.1f} s in executor calls "
        f"({time.perf_counter() - run_started:.1f} s since start) | trace {trace_path}",
        file=sys.stdout,
    )


def _record(task_name, opts, result, trace_path, extra) -> ProblemRecord:
    m = result.metrics
    return ProblemRecord(
        problem_id=result.problem.id,
        method=opts.method,
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
        trace_path=str(trace_path),
        extra=extra,
    )


def note_interrupt() -> bool:
    """Say what Ctrl-C during a run keeps (every finished problem is already on disk)."""
    click.echo("\ninterrupted: every finished problem is saved; continue with --resume", err=True)
    return True


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
    out: Path, todo_done: int, seconds: float, opts: TaskRunOptions, dtype: str, work: dict | None = None,
    packed_layers: int = 0, data_file: dict | None = None, extra_totals: dict | None = None, memory: dict | None = None,
) -> None:
    """This invocation's wall time, tokens/s over the run and peak RSS (under --concurrency the
    per-problem seconds above overlap, so the run's own clock is the throughput to compare);
    appended to OUT/runs.jsonl."""
    from seed_tot.records import peak_rss_mib

    records = load_records(out / "results.jsonl")[-todo_done:] if todo_done else []
    tokens = sum(r.new_tokens for r in records)
    totals = {
        "problems": todo_done, "concurrency": opts.concurrency, "batching": opts.batching,
        "method": opts.method, "method_options": list(opts.method_options), "dtype": dtype,
        "packed_linear_layers": packed_layers, "wall_seconds": round(seconds, 1),
        "new_tokens": tokens, "tokens_per_second": round(tokens / seconds, 2) if seconds > 0 else 0.0,
        "peak_rss_mib": round(peak_rss_mib()),
        **({"memory": memory} if memory else {}),
        **({"data_file": data_file} if data_file else {}),
        **({"session_work": work} if work else {}),
        **(extra_totals or {}),
    }
    click.echo(f"speed: {totals['tokens_per_second']} tokens/s over the run ({tokens} tokens, {todo_done} problems "
               f"in {seconds:.1f} s of wall time), peak RSS {totals['peak_rss_mib']} MiB"
               + (f" of a {memory['budget_bytes'] // 2**20} MiB budget" if memory else ""))
    append_json_lines(out / "runs.jsonl", [totals])


def select_problems(problems: list, start: int = 0, limit: int | None = None, ids: tuple[str, ...] = ()) -> list:
    """Problems by explicit ids (in the given order), else the slice [start, start + limit)."""
    if ids:
        by_id = {p.id: p for p in problems}
        missing = [i for i in ids if i not in by_id]
        if missing:
            raise SeedTotError(
                f"Unknown problem id(s) {', '.join(missing[:5])}: ids run from {problems[0].id} to {problems[-1].id}."
            )
        return [by_id[i] for i in ids]
    if start < 0 or start >= len(problems):
        raise SeedTotError(f"--start {start} is outside the data set of {len(problems)} problems.")
    end = len(problems) if limit is None else start + limit
    return problems[start:end]


class RunPlan(NamedTuple):
    """A checked run: settings, the task, its search, the problems still to do, the data file read."""

    opts: TaskRunOptions
    task: Any
    search_cls: type
    search_config: Any
    method_settings: dict
    todo: list
    out: Path
    data_file: dict


def plan_run(task_name: str, opts: TaskRunOptions) -> RunPlan:
    """Check every setting and pick the problems still to do, before any model loads."""
    from seed_tot.scheduling.factory import ENGINE_METHODS, can_score, default_concurrency
    from seed_tot.search import search_class
    from tasks import get_task
    from tasks.base import data_file_record

    if opts.method == "auto" and opts.ray_address is not None:
        opts = replace(opts, method="batched-lookup")  # Ray actors run the in-process executors
    elif opts.method == "auto":
        from seed_tot.cli.options import resolve_auto_method

        opts = replace(opts, method=resolve_auto_method(opts.target, opts.tiny, opts.device))
    if opts.ray_address is not None and opts.method in ENGINE_METHODS:
        raise ConfigError(f"--ray runs the in-process methods, not --method {opts.method}: pick e.g. --method "
                          "batched-lookup, or drop --ray and point --method server at your engine.")
    if opts.concurrency is None:
        opts = replace(opts, concurrency=default_concurrency(opts.method))
    _check_numbers(opts)
    method_settings = executor_options(opts)
    if opts.method not in ENGINE_METHODS:
        check_memory_before_loading(opts)
    task = get_task(task_name)
    opts = with_task_defaults(opts, task)
    search_cls = search_class(opts.search)
    if opts.value_mode == "logits":
        if not task.verdict_values:
            raise ConfigError(f"Task {task_name} has no verdict words to read from logits: use --value-mode samples.")
        if not can_score(opts.method):
            raise ConfigError(f"--method {opts.method} cannot read next-token log-probabilities: use --value-mode "
                              "samples, or a method such as batched-lookup, batched or ar.")
    if opts.value_mode == "learned" and (opts.method in ENGINE_METHODS or opts.ray_address is not None):
        raise ConfigError(f"--value-mode learned reads the target's hidden states in this process, which --method "
                          f"{opts.method}{' with --ray' if opts.ray_address is not None else ''} does not hold: use an "
                          "in-process method such as batched-lookup, or --value-mode logits.")
    if opts.value_model is not None and opts.value_mode != "learned":
        raise ConfigError("--value-model applies to --value-mode learned: add it, or drop --value-model.")
    if opts.thought_mode == "choose" and not can_score(opts.method):
        raise ConfigError(f"--method {opts.method} cannot read next-token log-probabilities: use --thought-mode "
                          "sample, or a method such as batched-lookup, batched or ar.")
    try:
        search_config = search_cls.config_class(**search_settings(opts, task))
    except ValueError as exc:
        raise ConfigError(f"Bad search settings: {str(exc).splitlines()[-1]}.") from None
    search_cls.check(task, search_config)
    if opts.depth is not None and task.depth is not None:
        task.depth = opts.depth  # GSM8K asks its closing question on the last level
    ids = tuple(i.strip() for i in opts.ids.split(",") if i.strip()) if opts.ids else ()
    problems = select_problems(task.load(opts.data_path), opts.start, opts.limit, ids)
    data_file = data_file_record(Path(opts.data_path) if opts.data_path else task.default_data_path)
    out = output_dir(task_name, opts)
    done = finished_ids(out / "results.jsonl") if opts.resume else set()
    if done:
        check_resume(out, resume_settings(task, search_cls, search_config, opts))
    todo = [p for p in problems if p.id not in done]
    if done:
        click.echo(f"resuming: {len(problems) - len(todo)} of {len(problems)} problems already done")
    return RunPlan(opts, task, search_cls, search_config, method_settings, todo, out, data_file)



def resume_settings(task, search_cls, search_config, opts: TaskRunOptions) -> dict[str, Any]:
    """What a resumed run must share with the run it continues (seed_tot/cli/resume.py)."""
    from seed_tot.observe.trace import jsonable
    from seed_tot.scheduling.factory import ENGINE_METHODS

    target = None if opts.method in ENGINE_METHODS else target_name(opts)
    return {"task": task.name, "search": search_cls.name, "target": target,
            "search_config": jsonable(search_config.model_dump(mode="json"))}


def nothing_left(todo: list, out: Path) -> bool:
    """True, after the summary of what is already there, when a resumed run has no problem left (no model loads)."""
    if todo:
        return False
    click.echo("nothing left to run: every selected problem is already in results.jsonl")
    print_summary(out)
    return True


def run_task(task_name: str, opts: TaskRunOptions) -> None:
    from seed_tot.api import to_trace
    from seed_tot.distributed.spec import model_names, trace_settings
    from seed_tot.reasoning.prompting import PromptFormatter
    from seed_tot.scheduling.factory import ENGINE_METHODS, make_executor
    from seed_tot.search.driver import solve_many

    opts, task, search_cls, search_config, method_settings, todo, out, data_file = plan_run(task_name, opts)
    if nothing_left(todo, out):
        return
    memory = None
    if opts.method in ENGINE_METHODS:
        engine = open_engine(opts)
        executor, tokenizer, models, packed_layers = engine.executor, engine.tokenizer, engine.models, 0
        extra_config = {"method": opts.method, "dtype": "gguf", "engine": engine.engine,
                        **{k: list(v) if isinstance(v, tuple) else v for k, v in method_settings.items()}}
    else:
        target, draft = executor_spec(opts, method_settings).load_models()
        memory, method_settings = within_memory_budget(opts, target, draft, method_settings)
        executor = make_executor(opts.method, target, draft, **method_settings)
        tokenizer, packed_layers = target.tokenizer, target.packed_layers
        models = model_names(target, draft)
        extra_config = trace_settings(opts.method, target, method_settings)
        extra_config["memory"] = memory
    dtype = extra_config["dtype"]  # what --dtype auto resolved to on this machine
    formatter = PromptFormatter(tokenizer)
    if opts.value_mode == "logits":
        from seed_tot.reasoning.evaluator import verdict_tokens

        verdict_tokens(task, formatter)  # refuses verdict words this tokenizer cannot tell apart, before any search
    judge = None
    if opts.value_mode == "learned":
        from seed_tot.values.judge import LearnedJudge

        judge = LearnedJudge.load(target, opts.value_model)
        extra_config["value_head"] = {"id": judge.head_id, "path": str(opts.value_model or "packaged"),
                                      "layer": judge.head.layer}
    interrupted = False
    search = search_cls(task, executor, formatter, search_config, judge=judge)
    problem_bar = tqdm(total=len(todo), desc=f"{task_name} ({opts.method}, {opts.search})", unit="problem", file=sys.stderr)
    batch_bar = tqdm(desc="requests", unit="request", file=sys.stderr, leave=False)
    executor = ProgressExecutor(executor, batch_bar)
    run_started = time.perf_counter()
    try:
        for result in solve_many(search.steps, todo, executor, opts.concurrency, continuous=opts.batching == "continuous"):
            extra = problem_extra(task_name, opts.seed, task, executor, formatter, result)
            trace = to_trace(result, task, executor, models=models, extra_config=extra_config, data_file=data_file)
            keep_problem(task_name, opts, out, result, trace, extra, run_started)
            problem_bar.update(1)
    except KeyboardInterrupt:
        interrupted = note_interrupt()
    finally:
        batch_bar.close()
        problem_bar.close()
        executor.close()
    print_summary(out)
    work = getattr(executor, "work", None)  # sessions' prefill/decode split (executors with sessions)
    print_run_totals(out, todo_done=problem_bar.n, seconds=time.perf_counter() - run_started, opts=opts, dtype=dtype,
                     work=work.as_dict() if work is not None else None, packed_layers=packed_layers,
                     data_file=data_file, memory=memory)
    if interrupted:
        sys.exit(130)
