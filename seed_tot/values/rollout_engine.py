"""What samples a judge's chains: the in-process default, or llama.cpp's server on the target's own
weights file (the same model; on a CPU without native 16-bit arithmetic several times faster)."""

from __future__ import annotations

from seed_tot.scheduling.methods import IN_PROCESS_DEFAULT_METHOD, method_named

ROLLOUT_METHODS = {"in-process": IN_PROCESS_DEFAULT_METHOD, "llama-cpp": "llama-cpp"}
ROLLOUT_REQUEST_TIMEOUT_S = 24 * 3600.0
ENGINE_RECORD = ("engine", "build", "xllamacpp", "model_file", "model_sha256", "threads", "slots", "ctx_per_slot", "sampler")


def open_rollout_executor(engine: str, target_name: str, target, rows: int) -> tuple:
    """(executor, method name, engine record) for sampling chains. llama.cpp gets a slot for every
    row in flight and all the cores, and no request timeout: on a busy machine a wide batch can take
    longer than the task commands' timeout, and a retry would only start the chain again."""
    method = ROLLOUT_METHODS[engine]
    if method_named(method).engine:
        from seed_tot.engines.setup import open_llama_cpp

        run = open_llama_cpp(target_name, slots=rows, timeout=ROLLOUT_REQUEST_TIMEOUT_S)
        return run.executor, method, {k: v for k, v in run.engine.items() if k in ENGINE_RECORD}
    from seed_tot.scheduling.factory import make_executor

    return make_executor(method, target, None), method, None


def engine_settings(engine: dict | None) -> dict:
    """What a pool row records of the engine: its weights file and settings, not the in-process dtype."""
    return {} if engine is None else {"dtype": engine.get("model_file", "gguf"), "engine": engine}
