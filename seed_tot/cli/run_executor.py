"""A run's executor from its configuration: the models loaded in this process (or the recipe a Ray
actor loads them from), or the inference server an engine method starts or connects to, and the
memory budget that bounds an in-process run."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, NamedTuple

from seed_tot.cli.run_config import RunConfig, probe_width


class LoadedExecutor(NamedTuple):
    """What a run searches with, and what its traces record about it."""

    executor: Any
    tokenizer: Any
    target: Any  # the target's ModelRunner (None for an engine)
    models: dict[str, str]  # the trace's `models`
    packed_layers: int
    trace_config: dict[str, Any]  # what the trace's `config` records beside the search
    memory: dict | None  # the memory plan, where the method's rows are bounded by it


def load_executor(config: RunConfig, settings: dict, longest_request: int | None = None) -> LoadedExecutor:
    """Load the models and build the method's executor, or open its engine. `longest_request`: the
    most tokens (prompt + new) any request of the run can hold, where known before it starts."""
    from seed_tot.distributed.spec import model_names, trace_settings
    from seed_tot.scheduling.factory import make_executor

    if config.method_info.engine:
        engine = open_engine(config, longest_request)
        recorded = {"method": config.method, "dtype": "gguf", "engine": engine.engine}  # engines take no settings
        return LoadedExecutor(engine.executor, engine.tokenizer, None, engine.models, 0, recorded, None)
    target, draft = executor_spec(config, settings).load_models()
    memory, settings = within_memory_budget(config, target, draft, settings)
    executor = make_executor(config.method, target, draft, **settings)
    recorded = trace_settings(config.method, target, settings) | {"memory": memory}
    return LoadedExecutor(executor, target.tokenizer, target, model_names(target, draft), target.packed_layers,
                          recorded, memory)


def executor_spec(config: RunConfig, settings: dict):
    """The models and executor of this run, as a recipe any process (a Ray actor too) can build."""
    from seed_tot.distributed.spec import ExecutorSpec

    return ExecutorSpec(method=config.method, target=config.target_name, draft=config.draft_name, dtype=config.dtype,
                        int8=config.int8, device=config.device, draft_dtype=config.draft_dtype, threads=config.threads, options=settings)


def open_engine(config: RunConfig, longest_request: int | None = None):
    """The server executor of an engine method: a server started for this run (each slot's context
    sized to `longest_request` where it is known, else the engine's default), or one running."""
    from seed_tot.engines.setup import DEFAULT_CTX_PER_SLOT, EngineSettings, slot_context

    draft = config.draft_name if config.with_draft else None
    context = slot_context(longest_request) if longest_request else DEFAULT_CTX_PER_SLOT
    settings = EngineSettings(target=config.target_name, draft=draft, url=config.server_url, api=config.server_api,
                              parallel=config.server_parallel, threads=config.threads, timeout=config.server_timeout,
                              ctx_per_slot=context)
    if config.method_info.engine and not config.method_info.connects and config.server_parallel is None:
        settings = replace(settings, parallel=llama_cpp_slots(config, context))
    return config.method_info.builder()(settings)


def llama_cpp_slots(config: RunConfig, ctx_per_slot: int) -> int | None:
    """The slots of a llama.cpp server started for the run: one per row it decodes at once, as many
    as --max-memory holds; None (the engine's default) where the target's KV size is not known."""
    from pathlib import Path

    from seed_tot.engines.setup import gguf_path
    from seed_tot.scheduling.memory import engine_slots, kv_bytes_beside

    target_file = gguf_path(config.target_name)
    per_token = kv_bytes_beside(target_file)
    if per_token is None:
        return None
    free = memory_budget(config) - Path(target_file).stat().st_size
    return engine_slots(probe_width(config), ctx_per_slot, per_token, free)


def longest_chain_request(task, problems: list, search_cls, search_config, target_name: str) -> int | None:
    """The most tokens a request of a search made of whole chains of thought can hold: the longest
    chain prompt plus the chains' token budget. None for a tree, whose prompts grow with its states."""
    if not search_cls.whole_chains_only or not problems:
        return None
    from seed_tot.engines.setup import tokenizer_for
    from seed_tot.reasoning.prompting import PromptFormatter

    formatter = PromptFormatter(tokenizer_for(target_name))
    longest_prompt = max(len(formatter.encode(task.cot_prompt(problem))) for problem in problems)
    return longest_prompt + search_config.cot_decode.max_new_tokens


def memory_budget(config: RunConfig) -> int:
    from seed_tot.scheduling.memory import default_budget, parse_size

    return parse_size(config.max_memory) if config.max_memory is not None else default_budget()


def check_memory_before_loading(config: RunConfig, settings: dict) -> None:
    """Refuse a budget too small for the models' weights (a SEED run's draft once per worker), one
    row and the processes' runtime, before anything loads. `settings`: the method's settings."""
    from seed_tot.scheduling.memory import check_before_loading

    workers = settings.get("num_workers", 0) if config.method_info.draft_workers else 0
    check_before_loading(memory_budget(config), models_to_load(config, workers), extra_processes=workers)


def models_to_load(config: RunConfig, draft_workers: int = 0) -> list:
    """The run's target, and its draft: once, or once per draft worker process where the method
    drafts in `draft_workers` processes (the parent then loads no draft)."""
    from seed_tot.models.loading import dtype_name, resolve_device, resolve_draft_dtype, resolve_dtype
    from seed_tot.scheduling.memory import DTYPE_BYTES, ModelLoad

    device = resolve_device(config.device)
    dtype = resolve_dtype(config.dtype, device, config.target_name)
    loads = [ModelLoad(config.target_name, DTYPE_BYTES[dtype_name(dtype)])]
    method = config.method_info
    if method.needs_draft:
        draft_dtype = resolve_draft_dtype(config.draft_dtype, dtype, device)
        copies = draft_workers if method.draft_workers else 1
        loads.append(ModelLoad(config.draft_name, DTYPE_BYTES[dtype_name(draft_dtype)], copies))
    return loads


def within_memory_budget(config: RunConfig, target, draft, settings: dict) -> tuple[dict | None, dict]:
    """(the memory plan as recorded, the executor settings bounded by it) for the loaded models;
    methods without a batch of rows keep their settings (no plan)."""
    from seed_tot.scheduling.memory import plan_for_models

    if not config.method_info.memory_bounded:
        return None, settings
    plan = plan_for_models(memory_budget(config), target, draft, settings.get("prefix_cache_mb", 1024))
    bounded = {"prefix_cache_mb": plan.prefix_cache_mb, "max_kv_tokens": plan.max_kv_tokens} | settings
    return plan.record(), bounded
