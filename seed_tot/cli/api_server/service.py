"""The models, the one executor and its driver thread, the model ids and the traces folder that
every request of the API server shares."""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable

from seed_tot.errors import ConfigError
from seed_tot.cli.api_server.catalog import ModelEntry, build_catalog
from seed_tot.cli.api_server.driver import Job, TreeDriver
from seed_tot.search.base import SearchConfig, SearchResult
from seed_tot.task import Problem

TRACE_ID = re.compile(r"^[A-Za-z0-9_-]{1,80}$")


@dataclass
class Finished:
    """A request's finished tree: the search result, where its trace is, its token counts."""

    result: SearchResult
    trace_id: str
    trace_path: Path
    prompt_tokens: int
    completion_tokens: int


def resolved_options(opts):
    """The server's TaskRunOptions with method auto and the default concurrency resolved, checked
    before any model loads (as a task run checks its own)."""
    from seed_tot.cli.task_run import _check_numbers
    from seed_tot.scheduling.factory import default_concurrency

    if opts.search is not None:
        raise ConfigError("--search does not apply to the API: each model id names its search, e.g. gsm8k/bfs.")
    if opts.value_mode == "learned":
        raise ConfigError("The API server does not serve --value-mode learned: use logits, samples or constant.")
    if opts.method == "auto":
        from seed_tot.cli.options import resolve_auto_method

        opts = replace(opts, method=resolve_auto_method(opts.target, opts.tiny, opts.device))
    if opts.concurrency is None:
        opts = replace(opts, concurrency=default_concurrency(opts.method))
    _check_numbers(opts)
    return opts


def check_max_queue(max_queue: int | None) -> None:
    if max_queue is not None and max_queue < 1:
        raise ConfigError(f"--max-queue must be at least 1 (got {max_queue}).")


class ApiService:
    """Loads the models and executor of `opts` (a TaskRunOptions), starts the driver thread."""

    def __init__(self, opts, out_dir: str | Path, max_queue: int | None = None) -> None:
        from seed_tot.cli.task_run import check_memory_before_loading, executor_options
        from seed_tot.scheduling.factory import ENGINE_METHODS

        check_max_queue(max_queue)
        self.opts = opts = resolved_options(opts)
        method_settings = executor_options(opts)
        if opts.method not in ENGINE_METHODS:
            check_memory_before_loading(opts)
        self.catalog: dict[str, ModelEntry] = build_catalog(opts)
        self.out = Path(out_dir)
        (self.out / "traces").mkdir(parents=True, exist_ok=True)
        executor, self.tokenizer, self.models, self.extra_config = self._load(opts, method_settings)
        self.executor = executor
        self.driver = TreeDriver(executor, opts.concurrency, finish=self._finish,
                                 continuous=opts.batching == "continuous", max_queue=max_queue)

    @staticmethod
    def _load(opts, method_settings: dict):
        from seed_tot.cli.task_run import executor_spec, open_engine, within_memory_budget
        from seed_tot.distributed.spec import model_names, trace_settings
        from seed_tot.scheduling.factory import ENGINE_METHODS, make_executor

        if opts.method in ENGINE_METHODS:
            engine = open_engine(opts)
            extra = {"method": opts.method, "dtype": "gguf", "engine": engine.engine}
            return engine.executor, engine.tokenizer, engine.models, extra
        target, draft = executor_spec(opts, method_settings).load_models()
        memory, method_settings = within_memory_budget(opts, target, draft, method_settings)
        executor = make_executor(opts.method, target, draft, **method_settings)
        extra = trace_settings(opts.method, target, method_settings)
        extra["memory"] = memory
        extra["server"] = "seed-tot api"
        return executor, target.tokenizer, model_names(target, draft), extra

    def new_job(self, entry: ModelEntry, problem: Problem, config: SearchConfig,
                on_done: Callable[[Any], None], on_progress: Callable[[dict], None]) -> Job:
        """A job for one tree of `problem` (a fresh task object and search of its own)."""
        from seed_tot.reasoning.prompting import PromptFormatter
        from tasks import get_task

        task = get_task(entry.task_name)
        if config.depth is not None and task.depth is not None:
            task.depth = config.depth  # GSM8K asks its closing question on the last level
        search = entry.search_cls(task, None, PromptFormatter(self.tokenizer), config)
        trace_id = f"{problem.id}-{uuid.uuid4().hex[:12]}"
        return Job(job_id=trace_id, search=search, problem=problem, on_done=on_done, on_progress=on_progress)

    def _finish(self, job: Job, result: SearchResult) -> Finished:
        """Write the tree's trace (driver thread) and return what the reply needs."""
        from seed_tot.observe.trace import to_trace, write_trace

        trace = to_trace(result, job.search.task, self.executor, models=self.models,
                         extra_config=self.extra_config)
        path = write_trace(self.trace_file(job.job_id), trace)
        return Finished(result, job.job_id, path, job.prompt_tokens, result.metrics.new_tokens)

    def trace_file(self, trace_id: str) -> Path:
        if not TRACE_ID.match(trace_id):
            raise ConfigError(f"{trace_id!r} is not a trace id: ids hold letters, digits, '-' and '_'.")
        return self.out / "traces" / f"{trace_id}.json"

    def close(self, drain: bool = True, timeout: float | None = None) -> bool:
        return self.driver.close(drain=drain, timeout=timeout)
