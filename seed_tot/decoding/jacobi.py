"""Jacobi decoding: exact fixed-point iteration over blocks of tokens, no draft model.

Each iteration runs ONE forward over [pending token] + (block_size - 1) guessed tokens on top
of the KV cache. The guesses are one-hot proposals verified against the target's outputs
(verify_guesses): greedy keeps every guess equal to the argmax before it, sampling draws one
token per position and keeps the guesses it hits. The accepted tokens' KV entries stay in the
cache, the rest is rolled back, and the argmax outputs after them become the next guesses (the
Jacobi update). Output is token-identical to autoregressive decoding with the same seed,
greedy or sampled.

The helpers at the top (greedy-only check, the pending-token start) are shared by lookahead.py
and fastcot.py.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch

from seed_tot.config import DecodeConfig
from seed_tot.decoding.output import DecodeOutput
from seed_tot.decoding.speculative import check_prompt
from seed_tot.decoding.token_sink import TokenSink
from seed_tot.decoding.verify import verify_guesses
from seed_tot.errors import ConfigError
from seed_tot.requests import GenerationStats
from seed_tot.runtime import KVCache, ModelRunner, cache_length, rollback


def require_greedy(config: DecodeConfig, method: str) -> None:
    if not config.greedy:
        raise ConfigError(
            f"{method} is greedy-only: set temperature 0, or use autoregressive or speculative "
            "decoding for sampling."
        )


def start_pending(target: ModelRunner, prompt_ids: list[int]) -> tuple[KVCache, int]:
    """Cache the prompt except its last token, which becomes the pending (not yet fed) token."""
    cache = target.new_cache()
    if len(prompt_ids) > 1:
        target.forward(torch.tensor([prompt_ids[:-1]], dtype=torch.long), cache, logits_to_keep=1)
    return cache, prompt_ids[-1]


def initial_guesses(prompt_ids: list[int], length: int) -> list[int]:
    """First Jacobi guesses: the prompt's tokens cycled (as FastCoT does with the question)."""
    return [prompt_ids[i % len(prompt_ids)] for i in range(length)]


def refill(guesses: list[int], length: int) -> list[int]:
    """Pad a guess list to `length` by repeating its last token (positions never guessed yet)."""
    if not guesses:
        raise ValueError("cannot refill an empty guess list")
    return (guesses + [guesses[-1]] * length)[:length]


@dataclass
class JacobiStep:
    accepted: list[int]  # exact tokens: the matched guesses' outputs plus one more
    next_guesses: list[int]  # the outputs after the accepted ones (the Jacobi update)
    matched: int  # how many guesses were correct


def jacobi_step(
    target: ModelRunner, cache: KVCache, pending: int, guesses: list[int], config: DecodeConfig,
    generator: torch.Generator,
) -> JacobiStep:
    """One forward over [pending] + guesses; keep the cache of the accepted tokens only."""
    past = cache_length(cache)
    logits = target.forward(torch.tensor([[pending] + guesses], dtype=torch.long), cache)[0]
    chain = list(range(-1, len(guesses) - 1))
    verdict = verify_guesses(guesses, chain, logits, config.temperature, config.top_p, generator)
    k = len(verdict.accepted_nodes)
    rollback(cache, past + 1 + k)  # pending + the k accepted guesses
    next_guesses = logits[k + 1 :].argmax(-1).tolist()
    return JacobiStep(accepted=verdict.accepted_tokens + [verdict.next_token], next_guesses=next_guesses, matched=k)


def jacobi_decode(
    target: ModelRunner, prompt_ids: list[int], config: DecodeConfig, seed: int = 0,
    block_size: int = 4,
) -> DecodeOutput:
    """Jacobi decoding with blocks of `block_size` tokens (1 pending + block_size - 1 guesses);
    sampled with `seed` as autoregressive decoding samples."""
    prompt_ids = check_prompt(prompt_ids)
    if block_size < 1:
        raise ConfigError(f"Jacobi block size {block_size} is too small: use 1 or more tokens.")
    started, forwards_before = time.perf_counter(), target.forward_count
    stats = GenerationStats()
    sink = TokenSink.of(target, config)
    generator = torch.Generator().manual_seed(seed)
    cache, pending = start_pending(target, prompt_ids)
    guesses = initial_guesses(prompt_ids, block_size - 1)
    while True:
        n_guesses = min(block_size - 1, sink.remaining - 1)
        step = jacobi_step(target, cache, pending, guesses[:n_guesses], config, generator)
        stats.draft_tokens_proposed += n_guesses
        stats.draft_tokens_accepted += step.matched
        if sink.extend(step.accepted):
            break
        pending = step.accepted[-1]
        guesses = refill(step.next_guesses or [pending], block_size - 1) if block_size > 1 else []
    stats.new_tokens = len(sink.token_ids)
    stats.target_forwards = target.forward_count - forwards_before
    stats.wall_seconds = time.perf_counter() - started
    return DecodeOutput(sink.token_ids, sink.finish_reason, stats)
