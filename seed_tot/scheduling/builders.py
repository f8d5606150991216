"""The builders of the in-process methods: build(method, target, draft, settings) -> Executor.

`method` is the method's record (seed_tot/scheduling/methods.py); `settings` are already checked,
hold the record's defaults, and, for a method that drafts, its draft shape as `k_config`. Each
builder imports what its executor needs, so a method's dependencies load only when it is used.
"""

from __future__ import annotations

from typing import Any

from seed_tot.errors import ConfigError
from seed_tot.requests import Executor
from seed_tot.runtime.runner import ModelRunner

DraftArg = ModelRunner | str | Any  # a runner, a model name, or a SEED DraftSource (NamedDraft, TinyDraft)


def build_ar(method, target: ModelRunner, draft: DraftArg | None, settings: dict) -> Executor:
    from seed_tot.scheduling.serial import ar_executor

    return ar_executor(target)


def build_serial_speculative(method, target: ModelRunner, draft: DraftArg, settings: dict) -> Executor:
    from seed_tot.scheduling.serial import mcsd_executor

    k_config = settings["k_config"]
    executor = mcsd_executor(draft_runner(draft, target), target, k_config)
    if set(method.k_config) == {1} and set(k_config) == {1}:  # a chain method drafting a chain: plain SD
        executor.name = f"sd(k={len(k_config)})"
    return executor


def build_batched(method, target: ModelRunner, draft: DraftArg | None, settings: dict) -> Executor:
    from seed_tot.scheduling.batched import BatchedARExecutor

    return BatchedARExecutor(target, **settings)


def build_batched_speculative(method, target: ModelRunner, draft: DraftArg, settings: dict) -> Executor:
    from seed_tot.scheduling.batched import BatchedSpeculativeExecutor

    settings = dict(settings)
    k_config = settings.pop("k_config")
    return BatchedSpeculativeExecutor(target, draft_runner(draft, target), k_config, name=method.name, **settings)


def build_batched_lookup(method, target: ModelRunner, draft: DraftArg | None, settings: dict) -> Executor:
    from seed_tot.scheduling.batched import BatchedSpeculativeExecutor

    settings = dict(settings)
    k_config = settings.pop("k_config")
    return BatchedSpeculativeExecutor(target, None, k_config, name=method.name, drafter="lookup", **settings)


def build_seed(method, target: ModelRunner, draft: DraftArg, settings: dict) -> Executor:
    from seed_tot.models.loading import dtype_name
    from seed_tot.scheduling.seed import SeedExecutor
    from seed_tot.scheduling.seed.worker import NamedDraft

    settings = dict(settings)
    num_workers = settings.pop("num_workers")
    if isinstance(draft, ModelRunner):
        # Workers load their own copy by the name the runner was loaded with.
        draft = NamedDraft(draft.name, dtype=dtype_name(draft.dtype), device=str(draft.device))
    return SeedExecutor(target, draft, num_workers=num_workers, name=method.name, **settings)


def build_bita(method, target: ModelRunner, draft: DraftArg | None, settings: dict) -> Executor:
    """BiTA with the prompt/mask tokens of `checkpoint` (seed-tot train bita), or untrained ones
    (still exact, but they draft little)."""
    from seed_tot.decoding.bita import BitaDecoder
    from seed_tot.decoding.bita_params import init_prompt, load_prompt
    from seed_tot.scheduling.serial import SerialExecutor

    settings = dict(settings)
    checkpoint = settings.pop("checkpoint", None)
    prompt = load_prompt(checkpoint) if checkpoint else init_prompt(target)
    decoder = BitaDecoder(target, prompt, **settings)
    return SerialExecutor(method.name, decoder.decode, target.decode, scorer=target)


def build_hf_generate(method, target: ModelRunner, draft: DraftArg | None, settings: dict) -> Executor:
    from seed_tot.scheduling.peers import peer_executor

    return peer_executor(method.name, target)


def build_serial_decoder(method, target: ModelRunner, draft: DraftArg | None, settings: dict) -> Executor:
    """A single-sequence decoder (decode(target, prompt_ids, config, seed, **settings)) run request
    by request; scoring requests read the target directly."""
    from seed_tot.scheduling.serial import SerialExecutor

    decode = method.decode_function()

    def decode_request(prompt_ids, config, seed):
        return decode(target, prompt_ids, config, seed, **settings)

    return SerialExecutor(method.name, decode_request, target.decode, scorer=target)


def draft_runner(draft: DraftArg, target: ModelRunner) -> ModelRunner:
    """The in-process draft model: a runner as given, or loaded by name (dtype: resolve_draft_dtype)."""
    if isinstance(draft, ModelRunner):
        return draft
    if isinstance(draft, str):
        from seed_tot.models.loading import load_draft

        return load_draft(draft, target)
    if hasattr(draft, "load"):  # a SEED draft source
        return draft.load()
    raise ConfigError(f"Cannot use {draft!r} as a draft model: pass a model name or a loaded ModelRunner.")
