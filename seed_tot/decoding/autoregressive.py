"""Plain autoregressive decoding of the target over a KV cache: the reference every decoder matches."""

from __future__ import annotations

import time
from collections.abc import Sequence

import torch

from seed_tot.config import DecodeConfig
from seed_tot.decoding.output import DecodeOutput
from seed_tot.decoding.sampling import probabilities, sample
from seed_tot.decoding.speculative import check_prompt
from seed_tot.decoding.token_sink import TokenSink
from seed_tot.requests import GenerationStats
from seed_tot.runtime import ModelRunner


def next_token(logits: torch.Tensor, config: DecodeConfig, generator: torch.Generator) -> int:
    """Greedy argmax, or a draw from the temperature / top-p distribution."""
    if config.greedy:
        return int(logits.argmax())
    return sample(probabilities(logits, config.temperature, config.top_p), generator)


def autoregressive_decode(
    target: ModelRunner, prompt_ids: Sequence[int], config: DecodeConfig, seed: int = 0
) -> DecodeOutput:
    """One token per target forward until EOS, a stop string or max_new_tokens."""
    started = time.perf_counter()
    prompt = check_prompt(prompt_ids)
    generator = torch.Generator().manual_seed(seed)
    sink = TokenSink.of(target, config)
    forwards_before = target.forward_count

    logits, cache = target.prefill(prompt)
    while not sink.extend([next_token(logits, config, generator)]):
        logits = target.forward(torch.tensor([[sink.token_ids[-1]]]), cache)[0, -1]

    stats = GenerationStats(
        new_tokens=len(sink.token_ids),
        target_forwards=target.forward_count - forwards_before,
        wall_seconds=time.perf_counter() - started,
    )
    return DecodeOutput(sink.token_ids, sink.finish_reason, stats)
