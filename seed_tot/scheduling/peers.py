"""Peer baselines: transformers' own generate() and assisted generation, as serial executors.

Used by benchmarks to put our executors next to what transformers users already have. Their
randomness comes from torch's global generator (generate() takes no generator), seeded per
request, so their sampled tokens differ from ours while following the same distribution.
"""

from __future__ import annotations

import time

import torch

from seed_tot.config import DecodeConfig
from seed_tot.decoding.output import DecodeOutput
from seed_tot.errors import ConfigError
from seed_tot.requests import GenerationStats
from seed_tot.runtime.runner import ModelRunner


def hf_generate_decode(
    target: ModelRunner, prompt_ids: list[int], config: DecodeConfig, seed: int, assistant: ModelRunner | None = None
) -> DecodeOutput:
    """One request through `model.generate()` (plain temperature / top-p sampling, no top-k)."""
    torch.manual_seed(seed)
    ids = torch.tensor([prompt_ids], device=target.device)
    kwargs = dict(
        attention_mask=torch.ones_like(ids),
        max_new_tokens=config.max_new_tokens,
        do_sample=not config.greedy,
        pad_token_id=target.pad_token_id,
        eos_token_id=sorted(target.eos_token_ids) or None,
    )
    if not config.greedy:
        kwargs.update(temperature=config.temperature, top_p=config.top_p, top_k=0)
    if config.stop_after_text:
        raise ConfigError("transformers' generate() cannot skip a reply's leading blank lines before its stop strings "
                          "(thought mode line): use an in-process method such as batched or ar.")
    if config.stop and target.tokenizer is not None:
        kwargs.update(stop_strings=list(config.stop), tokenizer=target.tokenizer)
    if assistant is not None:
        kwargs["assistant_model"] = assistant.model
    started = time.perf_counter()
    with torch.inference_mode():
        out = target.model.generate(ids, **kwargs)
    new = out[0, len(prompt_ids) :].tolist()
    finish = "eos" if new and new[-1] in target.eos_token_ids else ("length" if len(new) >= config.max_new_tokens else "stop")
    stats = GenerationStats(new_tokens=len(new), wall_seconds=time.perf_counter() - started)
    return DecodeOutput(new, finish, stats)


def peer_executor(name: str, target: ModelRunner, draft: ModelRunner | None = None):
    """'hf-generate' or 'hf-assisted' (needs `draft`) as a SerialExecutor."""
    from seed_tot.scheduling.serial import SerialExecutor

    assistant = draft if name == "hf-assisted" else None

    def decode(prompt_ids, config, seed):
        return hf_generate_decode(target, prompt_ids, config, seed, assistant)

    return SerialExecutor(name, decode, target.decode)
