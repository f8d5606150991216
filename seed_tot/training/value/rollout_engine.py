"""What samples a judge's chains: the in-process default, or llama.cpp's server on the target's own
weights file (the same model; on a CPU without native 16-bit arithmetic several times faster)."""

from __future__ import annotations

from dataclasses import dataclass

from seed_tot.scheduling.methods import IN_PROCESS_DEFAULT_METHOD, method_named

ROLLOUT_METHODS = {"in-process": IN_PROCESS_DEFAULT_METHOD, "llama-cpp": "llama-cpp"}
AUTO_ROLLOUT_ENGINE = "auto"
ROLLOUT_ENGINE_CHOICES = (AUTO_ROLLOUT_ENGINE, *ROLLOUT_METHODS)
ROLLOUT_REQUEST_TIMEOUT_S = 24 * 3600.0
ENGINE_RECORD = ("engine", "build", "xllamacpp", "model_file", "model_sha256", "threads", "slots", "ctx_per_slot", "sampler")


@dataclass(frozen=True)
class EngineTarget:
    """What rollouts need of a target that an engine runs: its name and the tokenizer that formats the
    prompts. No weights in this process; the pool rows record the engine's weights file instead."""

    name: str
    tokenizer: object
    dtype: str = "gguf"


def resolve_rollout_engine(engine: str, target_name: str, weights_loaded: bool) -> str:
    """`engine`, or for "auto" what `--method auto` picks for this target on this CPU: llama.cpp for
    a GGUF target on a CPU without native 16-bit arithmetic (and llama.cpp installed), else the
    in-process target, which samples faster where the CPU multiplies in bfloat16. When this process
    loads the target's weights anyway (for the features), auto samples with them: no second copy."""
    if engine != AUTO_ROLLOUT_ENGINE:
        return engine
    if weights_loaded:
        return "in-process"
    from seed_tot.scheduling.methods import AUTO, resolve_method

    picked = resolve_method(AUTO, target_name, tiny=False, device="cpu")
    return "llama-cpp" if method_named(picked).engine else "in-process"


def load_rollout_target(target_name: str, dtype: str, engine: str):
    """The target for sampling chains: loaded for the in-process engine, its tokenizer alone for an engine
    that holds the weights itself (a float32 1.5B target would take ~7 GB for nothing)."""
    if method_named(ROLLOUT_METHODS[engine]).engine:
        from seed_tot.models.loading import load_tokenizer

        return EngineTarget(target_name, load_tokenizer(target_name))
    from seed_tot.models.loading import load_model

    return load_model(target_name, dtype=dtype)


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
