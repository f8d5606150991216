"""The models, the one executor and its driver thread, the model ids and the traces folder that
every request of the API server shares."""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from seed_tot.errors import ConfigError
from seed_tot.cli.api_server.budget import DEFAULT_MAX_REQUEST_TOKENS
from seed_tot.cli.api_server.catalog import ModelEntry, build_catalog
from seed_tot.cli.api_server.driver import TreeDriver
from seed_tot.cli.api_server.jobs import Job
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


def resolved_config(config):
    """The server's RunConfig with the method and the default concurrency resolved, checked before
    any model loads (as a task run checks its own); each model id takes its task's own defaults."""
    from seed_tot.cli.run_checks import check_learned_judge, check_numbers, executor_settings
    from seed_tot.cli.run_config import resolve_config

    if config.search is not None:
        raise ConfigError("--search does not apply to the API: each model id names its search, e.g. gsm8k/bfs.")
    config = resolve_config(config)
    check_numbers(config)
    check_learned_judge(config)
    return config, executor_settings(config)


def check_max_queue(max_queue: int | None) -> None:
    if max_queue is not None and max_queue < 1:
        raise ConfigError(f"--max-queue must be at least 1 (got {max_queue}).")


def check_max_request_tokens(tokens: int) -> None:
    if tokens < 1:
        raise ConfigError(f"--max-request-tokens must be at least 1 (got {tokens}).")


class ApiService:
    """The models and executor of `config` (a RunConfig) and the driver that grows the requests'
    trees: on a thread of its own, or (own_thread=False) on the caller's, which calls `driver.run()`."""

    def __init__(self, config, out_dir: str | Path, max_queue: int | None = None, own_thread: bool = True,
                 max_request_tokens: int = DEFAULT_MAX_REQUEST_TOKENS) -> None:
        from seed_tot.cli.run_executor import check_memory_before_loading

        check_max_queue(max_queue)
        check_max_request_tokens(max_request_tokens)
        self.max_request_tokens = max_request_tokens  # the work budget of one request (budget.py)
        self.config, method_settings = resolved_config(config)
        if self.config.method_info.in_process:
            check_memory_before_loading(self.config, method_settings)
        self.catalog: dict[str, ModelEntry] = build_catalog(self.config)
        self.out = Path(out_dir)
        (self.out / "traces").mkdir(parents=True, exist_ok=True)
        self.judge = None
        self.driver = TreeDriver(lambda: self._load(method_settings), self.config.concurrency, finish=self._finish,
                                 continuous=self.config.batching == "continuous", max_queue=max_queue,
                                 own_thread=own_thread)
        self.executor = self.driver.executor

    def _load(self, method_settings: dict):
        """The models, the executor and the judge, loaded on the thread that grows the trees (see TreeDriver)."""
        from seed_tot.cli.run_executor import load_executor

        loaded = load_executor(self.config, method_settings)
        self.tokenizer, self.models = loaded.tokenizer, loaded.models
        self.extra_config = {**loaded.trace_config, "server": "seed-tot api", "run": self.config.recorded()}
        if any(entry.config.value_mode == "learned" for entry in self.catalog.values()):
            # the server's --value-mode, or a task's judged vote (GSM8K's self-consistency)
            from seed_tot.values.judge import judge_record, load_judge

            self.judge = load_judge(loaded.target, self.config.target_name, self.config.dtype, self.config.device,
                                    self.config.value_model)
            self.extra_config["value_head"] = judge_record(self.judge, self.config.value_model)
        return loaded.executor

    def new_job(self, entry: ModelEntry, problem: Problem, config: SearchConfig,
                on_done: Callable[[Any], None], on_progress: Callable[[dict], None]) -> Job:
        """A job for one tree of `problem` (a fresh task object and search of its own)."""
        from seed_tot.reasoning.prompting import PromptFormatter
        from seed_tot_tasks import get_task

        task = get_task(entry.task_name)
        search = entry.search_cls(task, None, PromptFormatter(self.tokenizer), config, judge=self.judge)
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

    def over_budget_defaults(self) -> list[str]:
        """The model ids whose default request (one tree) is over the work budget."""
        from seed_tot.cli.api_server.budget import default_work, token_bound

        return [model_id for model_id, entry in self.catalog.items()
                if token_bound(default_work(entry)) > self.max_request_tokens]

    def close(self, drain: bool = True, timeout: float | None = None) -> bool:
        return self.driver.close(drain=drain, timeout=timeout)
