"""A run's executor from its options: the recipe its models are loaded from, the inference server
an engine method starts or connects to, and the memory budget that bounds an in-process run."""

from __future__ import annotations

from seed_tot.cli.run_config import TaskRunOptions, target_name


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
