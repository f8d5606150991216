"""Jacobi decoding: exact greedy fixed-point iteration over blocks of tokens, no draft model.

Each iteration runs ONE forward over [pending token] + (block_size - 1) guessed tokens on top
of the KV cache. Output j is the greedy token after input j, so the outputs are exact for as
long as the guesses agree with them: the first output is always exact, then every guess that
equals the output before it makes the next output exact too. The accepted tokens' KV entries
stay in the cache, the rest is rolled back, and the remaining outputs become the next guesses
(the Jacobi update). Greedy output is token-identical to autoregressive decoding.

The helpers at the top (greedy-only check, the pending-token start, the token sink) are shared
by lookahead.py and fastcot.py.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch

from seed_tot.config import DecodeConfig
from seed_tot.decoding.output import DecodeOutput, StopCriteria
from seed_tot.decoding.speculative import check_prompt, stop_criteria
from seed_tot.errors import ConfigError
from seed_tot.requests import FinishReason, GenerationStats
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


@dataclass
class TokenSink:
    """Collects accepted tokens and applies the stop rule token by token."""

    stop: StopCriteria
    token_ids: list[int] = field(default_factory=list)
    finish_reason: FinishReason | None = None

    def extend(self, accepted: list[int]) -> bool:
        """Append accepted tokens, cut at the first stop; True once generation is finished."""
        start = len(self.token_ids)
        self.token_ids.extend(accepted)
        hit = self.stop.first_stop(self.token_ids, start)
        if hit is not None:
            keep, self.finish_reason = hit
            del self.token_ids[keep:]
        return self.finish_reason is not None

    @property
    def remaining(self) -> int:
        return self.stop.max_new_tokens - len(self.token_ids)


def matched_prefix(guesses: list[int], outputs: list[int]) -> int:
    """Number k of leading guesses equal to the output before them (outputs[j] follows input j)."""
    k = 0
    while k < len(guesses) and guesses[k] == outputs[k]:
        k += 1
    return k


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


def jacobi_step(target: ModelRunner, cache: KVCache, pending: int, guesses: list[int]) -> JacobiStep:
    """One forward over [pending] + guesses; keep the cache of the accepted tokens only."""
    past = cache_length(cache)
    logits = target.forward(torch.tensor([[pending] + guesses], dtype=torch.long), cache)[0]
    outputs = logits.argmax(-1).tolist()
    k = matched_prefix(guesses, outputs)
    rollback(cache, past + 1 + k)  # pending + the k correct guesses
    return JacobiStep(accepted=outputs[: k + 1], next_guesses=outputs[k + 1 :], matched=k)


def jacobi_decode(
    target: ModelRunner,
    prompt_ids: list[int],
    config: DecodeConfig,
    seed: int = 0,
    block_size: int = 4,
) -> DecodeOutput:
    """Greedy Jacobi decoding with blocks of `block_size` tokens (1 pending + block_size - 1 guesses).

    `seed` is unused (the method is deterministic); it is accepted for the common decoder signature.
    """
    require_greedy(config, "Jacobi decoding")
    prompt_ids = check_prompt(prompt_ids)
    if block_size < 1:
        raise ConfigError(f"Jacobi block size {block_size} is too small: use 1 or more tokens.")
    started, forwards_before = time.perf_counter(), target.forward_count
    stats = GenerationStats()
    sink = TokenSink(stop_criteria(target, config))
    cache, pending = start_pending(target, prompt_ids)
    guesses = initial_guesses(prompt_ids, block_size - 1)
    while True:
        n_guesses = min(block_size - 1, sink.remaining - 1)
        step = jacobi_step(target, cache, pending, guesses[:n_guesses])
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
