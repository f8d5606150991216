"""make_executor: one entry point from a method name to an Executor.

| method        | what runs                                                        | needs a draft |
|---------------|------------------------------------------------------------------|---------------|
| ar            | serial autoregressive decoding, one request after another        | no            |
| sd / mcsd     | serial speculative decoding, chain of k / k_config token tree    | yes           |
| batched       | all requests in one batch, one target forward per token          | no            |
| batched-sd    | speculative decoding batched across requests (k or k_config)    | yes           |
| batched-mcsd  | batched-sd with a token tree (k_config, default 2,2,1)           | yes           |
| batched-lookup| batched speculation with n-gram lookup drafts (k, default 2)     | no            |
| seed          | SEED: parallel draft processes + one verifier (k, default 3)     | yes           |
| seed-mcsd     | SEED with token trees (k_config, default 2,2,1)                  | yes           |
| lookahead / jacobi / fastcot | single-sequence decoders run request by request   | no            |
| cllm          | Jacobi decoding of a CLLM-trained copy of the target (checkpoint) | no            |
| bita          | BiTA: the target drafts with learned prompt/mask tokens (checkpoint) | no       |
| hf-generate   | transformers' model.generate(), one request after another (baseline) | no       |
| llama-cpp / server | an inference server (seed_tot/engines), one HTTP request each | optional |

Modules are imported lazily, so a method's dependencies load only when it is used.
"""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any, Callable

from seed_tot.errors import ConfigError
from seed_tot.requests import Executor
from seed_tot.runtime.runner import ModelRunner

SERIAL_DECODERS = {
    "lookahead": ("seed_tot.decoding.lookahead", "lookahead_decode"),
    "jacobi": ("seed_tot.decoding.jacobi", "jacobi_decode"),
    "fastcot": ("seed_tot.decoding.fastcot", "fastcot_decode"),
    "cllm": ("seed_tot.decoding.cllm", "cllm_decode"),
}
METHODS = (
    "ar",
    "sd",
    "mcsd",
    "batched",
    "batched-sd",
    "batched-mcsd",
    "batched-lookup",
    "seed",
    "seed-mcsd",
    *SERIAL_DECODERS,
    "bita",
    "hf-generate",
    "llama-cpp",
    "server",
)
# Methods whose tokens come from an inference server (seed_tot/engines), not from a ModelRunner.
ENGINE_METHODS = {"llama-cpp", "server"}
# Methods whose executors cannot read next-token log-probabilities (scoring requests: the logit
# State Evaluator, chosen moves); every other method's executor can.
CANNOT_SCORE = {"seed", "seed-mcsd", "hf-generate", *ENGINE_METHODS}


def can_score(method: str) -> bool:
    return method not in CANNOT_SCORE
# Problems searched at once on a server: enough requests in flight to fill its slots.
ENGINE_CONCURRENCY = 4
NEEDS_DRAFT = {"sd", "mcsd", "batched-sd", "batched-mcsd", "seed", "seed-mcsd"}
# Draft tokens per batched-lookup step over all rows. A drafted token costs a slot of the forward
# whether accepted or not, so it pays only while its acceptance beats its share of the forward's
# cost, which falls as rows are added: with lookup's acceptance, k=2 up to 4 rows, k=1 up to 8,
# none beyond (measured: docs/many_problems.md#what-a-wide-forward-costs).
LOOKUP_DRAFT_SLOT_BUDGET = 8
BATCHED_OPTIONS = {"share_prefix", "compact_slack", "prefix_cache_mb", "max_kv_tokens"}
BATCHED_SD_OPTIONS = BATCHED_OPTIONS | {"k", "k_config", "adaptive_k", "max_k"}
BATCHED_LOOKUP_OPTIONS = BATCHED_OPTIONS | {"k", "adaptive_k", "max_k", "max_ngram", "min_ngram", "draft_slot_budget"}
BITA_OPTIONS = {"checkpoint", "candidates", "depth"}
BATCHED_METHODS = {"batched", "batched-sd", "batched-mcsd", "batched-lookup"}
# Problems searched at once when --concurrency is not given. The batched methods decode every
# problem's rows in one forward, whose cost per row falls with its width (measured:
# docs/many_problems.md#throughput-12-problems-at-c--1-4-8-16); the other methods run requests
# one after another, so more problems at once would only delay each one's result.
BATCHED_CONCURRENCY = 16

DraftArg = ModelRunner | str | Any  # a runner, a model name, or a SEED DraftSource (NamedDraft, TinyDraft)


def default_concurrency(method: str) -> int:
    if method in ENGINE_METHODS:
        return ENGINE_CONCURRENCY
    return BATCHED_CONCURRENCY if method in BATCHED_METHODS else 1


def make_executor(method: str, target: ModelRunner, draft: DraftArg | None = None, **options) -> Executor:
    """Build the executor for `method` (see the module table); options are the method's settings."""
    if method not in METHODS:
        raise ConfigError(f"Unknown method {method!r}: use one of {', '.join(METHODS)}.")
    if method in NEEDS_DRAFT and draft is None:
        raise ConfigError(f"Method {method!r} needs a draft model: pass a draft of the target's tokenizer family.")
    check_options(method, options)
    if method in ENGINE_METHODS:
        raise ConfigError(
            f"Method {method!r} runs on an inference server, not on a loaded model: use it from a task command "
            "(e.g. seed-tot gsm8k --method llama-cpp) or build it with seed_tot.engines.setup.open_llama_cpp or open_server."
        )
    if method == "ar":
        from seed_tot.scheduling.serial import ar_executor

        return ar_executor(target)
    if method in ("sd", "mcsd"):
        return _serial_speculative(method, target, _draft_runner(draft, target), options)
    if method == "batched":
        from seed_tot.scheduling.batched import BatchedARExecutor

        return BatchedARExecutor(target, **options)
    if method in ("batched-sd", "batched-mcsd"):
        from seed_tot.scheduling.batched import BatchedSpeculativeExecutor

        default = (2, 2, 1) if method == "batched-mcsd" else (1,) * 4
        k_config = _k_config(options, default)
        return BatchedSpeculativeExecutor(target, _draft_runner(draft, target), k_config, name=method, **options)
    if method == "batched-lookup":
        from seed_tot.scheduling.batched import BatchedSpeculativeExecutor

        k_config = _k_config(options, (1,) * 2)
        options = {"draft_slot_budget": LOOKUP_DRAFT_SLOT_BUDGET} | options
        return BatchedSpeculativeExecutor(target, None, k_config, name=method, drafter="lookup", **options)
    if method in ("seed", "seed-mcsd"):
        return _seed(method, target, draft, options)
    if method == "bita":
        return _bita(target, options)
    if method == "hf-generate":
        from seed_tot.scheduling.peers import peer_executor

        return peer_executor(method, target)
    return _serial_decoder(method, target, options)


def option_names(method: str) -> set[str]:
    """The settings make_executor takes for `method` (no model is loaded)."""
    if method not in METHODS:
        raise ConfigError(f"Unknown method {method!r}: use one of {', '.join(METHODS)}.")
    if method in ("ar", "hf-generate") or method in ENGINE_METHODS:
        return set()
    if method in ("sd", "mcsd"):
        return {"k", "k_config"}
    if method == "batched":
        return BATCHED_OPTIONS
    if method in ("batched-sd", "batched-mcsd"):
        return BATCHED_SD_OPTIONS
    if method == "batched-lookup":
        return BATCHED_LOOKUP_OPTIONS
    if method in ("seed", "seed-mcsd"):
        from seed_tot.scheduling.seed import SeedOptions

        return {f.name for f in dataclasses.fields(SeedOptions)} | {"k", "num_workers"}
    if method == "bita":
        return BITA_OPTIONS
    return set(list(inspect.signature(_serial_decode_function(method)).parameters)[4:])  # (target, prompt_ids, config, seed, **settings)


def _serial_decode_function(method: str) -> Callable:
    import importlib

    module_name, function_name = SERIAL_DECODERS[method]
    return getattr(importlib.import_module(module_name), function_name)


def check_options(method: str, options: dict) -> None:
    """Refuse, in one sentence, a setting `method` does not have."""
    allowed = option_names(method)
    unknown = sorted(set(options) - allowed)
    if unknown:
        valid = ", ".join(sorted(allowed)) or "none"
        raise ConfigError(f"Method {method!r} has no option {', '.join(unknown)}: its options are {valid}.")


def _k_config(options: dict, default: tuple[int, ...]) -> tuple[int, ...]:
    """k_config from `k_config`, or a chain of `k` tokens; removes both from options."""
    from seed_tot.config import parse_k_config

    k, k_config = options.pop("k", None), options.pop("k_config", None)
    if k is not None and k_config is not None:
        raise ConfigError("Give either k or k_config, not both: k=4 means k_config=1,1,1,1.")
    if k is not None:
        if int(k) < 1:
            raise ConfigError(f"Bad draft length k={k}: give a positive number of draft tokens.")
        return (1,) * int(k)
    return parse_k_config(k_config if k_config is not None else default)


def _dtype_name(runner: ModelRunner) -> str:
    return str(runner.dtype).removeprefix("torch.")


def _draft_runner(draft: DraftArg, target: ModelRunner) -> ModelRunner:
    """The in-process draft model: a runner as given, or loaded by name (dtype: resolve_draft_dtype)."""
    if isinstance(draft, ModelRunner):
        return draft
    if isinstance(draft, str):
        from seed_tot.models.loading import load_draft

        return load_draft(draft, target)
    if hasattr(draft, "load"):  # a SEED draft source
        return draft.load()
    raise ConfigError(f"Cannot use {draft!r} as a draft model: pass a model name or a loaded ModelRunner.")


def _serial_speculative(method: str, target: ModelRunner, draft: ModelRunner, options: dict) -> Executor:
    from seed_tot.scheduling.serial import mcsd_executor

    k_config = _k_config(dict(options), (2, 2, 1) if method == "mcsd" else (1,) * 4)
    executor = mcsd_executor(draft, target, k_config)
    if method == "sd" and set(k_config) == {1}:
        executor.name = f"sd(k={len(k_config)})"
    return executor


def _seed(method: str, target: ModelRunner, draft: DraftArg, options: dict) -> Executor:
    from seed_tot.scheduling.seed import SeedExecutor
    from seed_tot.scheduling.worker import NamedDraft

    options = dict(options)
    num_workers = options.pop("num_workers", 3)
    k_config = _k_config(options, (2, 2, 1) if method == "seed-mcsd" else (1, 1, 1))
    if isinstance(draft, ModelRunner):
        # Workers load their own copy by the name the runner was loaded with.
        draft = NamedDraft(draft.name, dtype=_dtype_name(draft), device=str(draft.device))
    return SeedExecutor(target, draft, num_workers=num_workers, name=method, k_config=k_config, **options)


def _bita(target: ModelRunner, options: dict) -> Executor:
    """BiTA with the prompt/mask tokens of `checkpoint` (seed-tot train bita), or untrained ones
    (still exact, but they draft little)."""
    from seed_tot.decoding.bita import BitaDecoder
    from seed_tot.decoding.bita_params import init_prompt, load_prompt
    from seed_tot.scheduling.serial import SerialExecutor

    options = dict(options)
    checkpoint = options.pop("checkpoint", None)
    prompt = load_prompt(checkpoint) if checkpoint else init_prompt(target)
    decoder = BitaDecoder(target, prompt, **options)
    return SerialExecutor("bita", decoder.decode, target.decode, scorer=target)


def _serial_decoder(method: str, target: ModelRunner, options: dict) -> Executor:
    from seed_tot.scheduling.serial import SerialExecutor

    decode = _serial_decode_function(method)

    def decode_request(prompt_ids, config, seed):
        return decode(target, prompt_ids, config, seed, **options)

    return SerialExecutor(method, decode_request, target.decode, scorer=target)
