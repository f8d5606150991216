"""One task run from the CLI: check the settings, load models, search every problem, keep
every finished problem (results.jsonl + one trace each), print a summary."""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, NamedTuple

import click
from tqdm import tqdm

from seed_tot.cli.resume import check_resume
from seed_tot.config import DecodeConfig, parse_k_config
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


@dataclass
class TaskRunOptions:
    target: str
    draft: str
    tiny: bool
    device: str
    dtype: str
    threads: int | None
    method: str
    k_config: str | None
    k: int | None
    workers: int | None
    search: str | None  # None: the task's default_search (bfs where the task names none)
    n_thoughts: int
    breadth: int
    depth: int | None
    iterations: int
    exploration_weight: float
    output_strategy: str
    temperature: float
    top_p: float
    max_new_tokens: int | None  # None: the task's thought budget (256 unless the task says more)
    value_max_new_tokens: int
    value_samples: int
    value_temperature: float
    cot: bool
    vote: bool
    cot_samples: int
    seed: int
    data_path: str | None
    limit: int | None
    start: int
    ids: str | None
    out_dir: str | None
    resume: bool
    concurrency: int | None = None  # None: default_concurrency(method)
    batching: str = "continuous"
    method_options: tuple[str, ...] = ()
    draft_dtype: str = "auto"
    value_mode: str | None = None  # None: the task's default_value_mode where the method can score, else samples
    value_model: str | None = None  # value mode learned: the head file (None: the one shipped for the target)
    known_states: bool = True
    server_url: str | None = None
    server_api: str = "auto"
    server_parallel: int | None = None
    server_timeout: float = 600.0
    with_draft: bool = False
    ray_address: str | None = None  # None: run here; "": Ray's default cluster; else a Ray address
    ray_actors: int | None = None  # None: one per machine (seed_tot.distributed.ray_pool.plan_actors)
    vote_weight: str = "leaf"
    thought_mode: str | None = None  # None: the task's default_thought_mode where the method can score, else sample
    backtrack: bool = True
    max_memory: str | None = None  # None: default_budget() (half the machine's RAM)


def executor_options(opts: TaskRunOptions) -> dict:
    """Method settings for make_executor, validated before any model loads."""
    from seed_tot.scheduling.factory import NEEDS_DRAFT, check_options

    options: dict = {}
    if opts.k_config is not None and opts.k is not None:
        raise ConfigError("Give either --k or --k-config, not both: --k 4 means --k-config 1,1,1,1.")
    if opts.k_config is not None:
        options["k_config"] = parse_k_config(opts.k_config)
    if opts.k is not None:
        if opts.k < 1:
            raise ConfigError(f"Bad --k {opts.k}: give a positive number of draft tokens.")
        options["k"] = opts.k
    if options and opts.method not in NEEDS_DRAFT | {"batched-lookup"}:
        raise ConfigError(f"--k/--k-config apply to speculative methods, not to --method {opts.method}.")
    if opts.with_draft and opts.method != "llama-cpp":
        raise ConfigError(f"--with-draft applies to --method llama-cpp, not to --method {opts.method}.")
    if opts.server_url and opts.method != "server":
        raise ConfigError(f"--server-url applies to --method server, not to --method {opts.method}.")
    if opts.method.startswith("seed"):
        options["num_workers"] = opts.workers or opts.n_thoughts
    elif opts.workers is not None:
        raise ConfigError(f"--workers applies to --method seed or seed-mcsd, not to --method {opts.method}.")
    for item in opts.method_options:
        name, value = parse_method_option(item)
        if name in options:
            raise ConfigError(f"--method-option {name} is given twice (or also by --k, --k-config or --workers): keep one.")
        options[name] = value
    check_options(opts.method, options)
    return options


def parse_method_option(item: str) -> tuple[str, object]:
    """"batched_verify=true" -> ("batched_verify", True) (also yes/no, on/off); numbers become int or float."""
    name, sep, text = (part.strip() for part in item.partition("="))
    if not sep or not name or not text:
        raise ConfigError(f"Bad --method-option {item!r}: write NAME=VALUE, e.g. --method-option batched_verify=true.")
    if text.lower() in ("true", "false", "yes", "no", "on", "off"):
        return name, text.lower() in ("true", "yes", "on")
    for kind in (int, float):
        try:
            return name, kind(text)
        except ValueError:
            pass
    return name, text


DEFAULT_THOUGHT_TOKENS = 256


def search_settings(opts: TaskRunOptions, task=None) -> dict:
    """The search config's settings from the options (`task` supplies the default thought budget)."""
    thought_tokens = opts.max_new_tokens or (task.thought_tokens if task is not None else DEFAULT_THOUGHT_TOKENS)
    settings = {
        "n_thoughts": opts.n_thoughts,
        "depth": opts.depth,
        "seed": opts.seed,
        "thought_decode": DecodeConfig(
            max_new_tokens=thought_tokens, temperature=opts.temperature, top_p=opts.top_p
        ),
        "value_decode": DecodeConfig(
            max_new_tokens=opts.value_max_new_tokens, temperature=opts.value_temperature, top_p=opts.top_p
        ),
        "value_samples": opts.value_samples,
        "value_mode": opts.value_mode,
        "known_states": opts.known_states,
        "thought_mode": opts.thought_mode,
        "cot_candidate": opts.cot,
        "cot_samples": opts.cot_samples,
        "vote": opts.vote,
        "vote_weight": opts.vote_weight,
    }
    if opts.search == "bfs":
        settings["breadth"] = opts.breadth
        settings["backtrack"] = opts.backtrack
    elif opts.search == "mcts":
        settings.update(
            iterations=opts.iterations,
            exploration_weight=opts.exploration_weight,
            output_strategy=opts.output_strategy,
        )
    return settings


def _check_numbers(opts: TaskRunOptions) -> None:
    for name, value in [("--thoughts", opts.n_thoughts), ("--breadth", opts.breadth), ("--iterations", opts.iterations),
                        ("--max-new-tokens", opts.max_new_tokens or 1), ("--value-max-new-tokens", opts.value_max_new_tokens),
                        ("--value-samples", opts.value_samples), ("--concurrency", opts.concurrency)]:
        if value < 1:
            raise ConfigError(f"{name} must be at least 1 (got {value}).")
    if opts.depth is not None and opts.depth < 1:
        raise ConfigError(f"--depth must be at least 1 (got {opts.depth}).")
    if opts.cot_samples < 0:
        raise ConfigError(f"--cot-samples must be 0 (none) or more (got {opts.cot_samples}).")
    if opts.limit is not None and opts.limit < 1:
        raise ConfigError(f"--limit must be at least 1 (got {opts.limit}).")
    for name, value in [("--temperature", opts.temperature), ("--value-temperature", opts.value_temperature)]:
        if value < 0:
            raise ConfigError(f"{name} must be 0 (greedy) or positive (got {value}).")
    if not 0 < opts.top_p <= 1:
        raise ConfigError(f"--top-p must be in (0, 1] (got {opts.top_p}).")
    sampled = [name for name, value in [("--temperature", opts.temperature), ("--value-temperature", opts.value_temperature)] if value > 0]
    if opts.method == "fastcot" and sampled:
        raise ConfigError(
            f"--method fastcot decodes greedily only (it is approximate by design): add "
            f"{' '.join(f'{name} 0' for name in sampled)}, or use --method lookahead or jacobi, which also sample."
        )


def output_dir(task_name: str, opts: TaskRunOptions) -> Path:
    out = Path(opts.out_dir) if opts.out_dir else Path("runs") / f"{task_name}-{opts.method}"
    results = out / "results.jsonl"
    if results.is_file() and results.stat().st_size > 0 and not opts.resume:
        raise SeedTotError(
            f"{results} already holds results: pass --resume to continue that run, or choose another --out."
        )
    return out


def target_name(opts: TaskRunOptions) -> str:
    return "tiny-target" if opts.tiny else opts.target


def executor_spec(opts: TaskRunOptions, method_settings: dict):
    """The models and executor of this run, as a recipe any process (a Ray actor too) can build."""
    from seed_tot.distributed.spec import ExecutorSpec

    draft_name = "tiny-draft" if opts.tiny else opts.draft
    return ExecutorSpec(method=opts.method, target=target_name(opts), draft=draft_name, dtype=opts.dtype,
                        device=opts.device, draft_dtype=opts.draft_dtype, threads=opts.threads,
                        options=method_settings)


def open_engine(opts: TaskRunOptions):
    """The server executor of --method llama-cpp (a server started for this run) or server."""
    from seed_tot.engines.setup import open_llama_cpp, open_server

    target = target_name(opts)
    if opts.method == "server":
        return open_server(opts.server_url, target, opts.server_api, opts.server_parallel, opts.server_timeout)
    draft = ("tiny-draft" if opts.tiny else opts.draft) if opts.with_draft else None
    return open_llama_cpp(target, draft, opts.server_parallel, opts.threads, opts.server_timeout)


def memory_budget(opts: TaskRunOptions) -> int:
    from seed_tot.scheduling.memory import default_budget, parse_size

    return parse_size(opts.max_memory) if opts.max_memory is not None else default_budget()


def check_memory_before_loading(opts: TaskRunOptions) -> None:
    """Refuse a budget too small for the target's weights and one row, before anything loads."""
    from seed_tot.models.loading import resolve_device, resolve_dtype
    from seed_tot.scheduling.memory import DTYPE_BYTES, check_before_loading

    name = target_name(opts)
    dtype = resolve_dtype(opts.dtype, resolve_device(opts.device), name)
    check_before_loading(memory_budget(opts), name, DTYPE_BYTES[str(dtype).removeprefix("torch.")])


def within_memory_budget(opts: TaskRunOptions, target, draft, method_settings: dict) -> tuple[dict | None, dict]:
    """(the memory plan as recorded, the executor settings bounded by it) for the loaded models;
    methods without a batch of rows keep their settings (no plan)."""
    from seed_tot.scheduling.factory import option_names
    from seed_tot.scheduling.memory import plan_for_models

    if "max_kv_tokens" not in option_names(opts.method):
        return None, method_settings
    plan = plan_for_models(memory_budget(opts), target, draft, method_settings.get("prefix_cache_mb", 1024))
    bounded = {"prefix_cache_mb": plan.prefix_cache_mb, "max_kv_tokens": plan.max_kv_tokens} | method_settings
    return plan.record(), bounded


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


def with_task_defaults(opts: TaskRunOptions, task) -> TaskRunOptions:
    """The task's own search, thought mode and value mode where the command gave none (the modes
    that read log-probabilities only where the method can score; a task may name another search for
    methods that cannot)."""
    from seed_tot.scheduling.factory import can_score

    scores = can_score(opts.method)
    search = task.default_search
    if not scores:
        search = task.default_search_unscored or search
    return replace(
        opts,
        search=opts.search or search,
        thought_mode=opts.thought_mode or (task.default_thought_mode if scores else "sample"),
        value_mode=opts.value_mode or (task.default_value_mode if scores else "samples"),
    )


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
