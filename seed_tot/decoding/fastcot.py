"""FastCoT (Zhang et al. 2023): a Jacobi window of approximate tokens, then an early answer.

Chain-of-thought tokens are produced by Jacobi iterations (see jacobi.py): each iteration makes
at least one exact token (identical to greedy autoregressive decoding) and leaves a window of
`window` approximate tokens after them, "a glimpse of the future". The iterations stop at a cap
(calibrated on a small subset: `seed-tot fastcot calibrate`), at EOS or a stop string, or at
max_new_tokens. Then the answer trigger ("So the answer is") is appended after the exact AND
the approximate tokens and the answer is generated greedily; it ends at EOS, at a newline that
follows some answer text, or after `max_answer_tokens`.

Beyond the paper, an optional per-instance convergence check: every `check_every` iterations
the answer is attempted (a few tokens, on a forked cache); the iterations stop as soon as two
attempts in a row give the same answer. FastCoT is approximate by design: its answers may
differ from those of a full chain of thought.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import torch

from seed_tot.config import DecodeConfig
from seed_tot.decoding.jacobi import (
    initial_guesses,
    jacobi_step,
    refill,
    require_greedy,
    start_pending,
)
from seed_tot.decoding.output import DecodeOutput
from seed_tot.decoding.speculative import check_prompt
from seed_tot.decoding.token_sink import TokenSink
from seed_tot.errors import ConfigError
from seed_tot.requests import FinishReason, GenerationStats
from seed_tot.runtime import KVCache, ModelRunner, fork_cache, rollback

DEFAULT_TRIGGER = " So the answer is"


@dataclass
class FastCoTOutput(DecodeOutput):
    """token_ids = exact_ids + approximate_ids + trigger_ids + answer_ids."""

    exact_ids: list[int] = field(default_factory=list)
    approximate_ids: list[int] = field(default_factory=list)
    trigger_ids: list[int] = field(default_factory=list)
    answer_ids: list[int] = field(default_factory=list)
    iterations: int = 0
    stopped_by: str = ""  # "cap", "converged", or the rationale's own end: "eos", "stop", "length"
    answer_attempts: list[list[int]] = field(default_factory=list)  # convergence-check answers, in order


@dataclass
class JacobiState:
    """Where the Jacobi iterations stand after `iteration` iterations."""

    iteration: int
    rationale: list[int]  # exact tokens, cut where the stop rule ends them
    approximate: list[int]  # the window's outputs after the exact tokens (empty once the rationale ended)
    ended: FinishReason | None  # set when the rationale itself ended (eos, stop string, max_new_tokens)
    cache: KVCache  # holds prompt + every exact token fed so far (shared: fork before changing)


def cut_at_eos(token_ids: list[int], eos_token_ids: frozenset[int]) -> list[int]:
    """Approximate tokens up to (not including) the first EOS the window predicted."""
    for i, token in enumerate(token_ids):
        if token in eos_token_ids:
            return token_ids[:i]
    return token_ids


def jacobi_iterations(
    target: ModelRunner,
    prompt_ids: list[int],
    config: DecodeConfig,
    window: int,
    init_ids: list[int],
    stats: GenerationStats,
) -> Iterator[JacobiState]:
    """Run Jacobi iterations with `window` guesses after the pending token; yield the state after each.

    The guess buffer starts with `init_ids` cycled (the paper initialises it with the question);
    after each iteration the outputs past the exact ones become the next guesses.
    """
    sink = TokenSink.of(target, config)
    cache, pending = start_pending(target, prompt_ids)
    buffer = initial_guesses(init_ids, 2 * window)
    unused = torch.Generator()  # FastCoT is greedy: verify_guesses draws nothing
    iteration = 0
    while True:
        n_guesses = min(window, sink.remaining - 1)
        step = jacobi_step(target, cache, pending, buffer[:n_guesses], config, unused)
        iteration += 1
        stats.draft_tokens_proposed += n_guesses
        stats.draft_tokens_accepted += step.matched
        if sink.extend(step.accepted):
            yield JacobiState(iteration, list(sink.token_ids), [], sink.finish_reason, cache)
            return
        pending = step.accepted[-1]
        buffer = refill(step.next_guesses + buffer[n_guesses + 1 :] or [pending], max(window, 1))
        approximate = cut_at_eos(step.next_guesses, target.eos_token_ids)
        yield JacobiState(iteration, list(sink.token_ids), approximate, None, cache)


def answer_finished(text: str) -> bool:
    """The answer ends at a newline that follows some answer text."""
    stripped = text.lstrip()
    return bool(stripped) and "\n" in stripped


def generate_answer(
    target: ModelRunner,
    cache: KVCache,
    prompt_ids: list[int],
    rationale: list[int],
    approximate: list[int],
    trigger_ids: list[int],
    max_tokens: int,
) -> tuple[list[int], FinishReason]:
    """Greedy answer after prompt + rationale + approximate + trigger, on a fork of `cache`.

    `cache` must hold at least prompt + rationale minus its last token (it may hold more).
    """
    context = prompt_ids + rationale
    answer_cache = fork_cache(cache)
    rollback(answer_cache, len(context) - 1)
    feed = [context[-1]] + approximate + trigger_ids
    logits = target.forward(torch.tensor([feed], dtype=torch.long), answer_cache, logits_to_keep=1)[0, -1]
    answer: list[int] = []
    while True:
        answer.append(int(logits.argmax()))
        if answer[-1] in target.eos_token_ids:
            return answer, "eos"
        if answer_finished(target.decode(answer)):
            return answer, "stop"
        if len(answer) >= max_tokens:
            return answer, "length"
        logits = target.forward(torch.tensor([[answer[-1]]], dtype=torch.long), answer_cache)[0, -1]


def check_fastcot_settings(window: int, max_iterations: int, max_answer_tokens: int, check_every: int | None) -> None:
    if window < 0 or max_iterations < 1 or max_answer_tokens < 1 or (check_every is not None and check_every < 1):
        raise ConfigError(
            f"Bad FastCoT settings (window={window}, cap={max_iterations}, answer tokens={max_answer_tokens}, "
            f"check every={check_every}): use window >= 0 and a cap, answer tokens and check interval >= 1."
        )


def fastcot_decode(
    target: ModelRunner, prompt_ids: list[int], config: DecodeConfig, seed: int = 0,
    window: int = 8,
    max_iterations: int = 16,
    trigger: str = DEFAULT_TRIGGER,
    max_answer_tokens: int = 16,
    check_every: int | None = None,
    check_answer_tokens: int = 8,
    init_ids: list[int] | None = None,
) -> FastCoTOutput:
    """FastCoT with a Jacobi window of `window` tokens and an iteration cap `max_iterations`.

    `config.max_new_tokens` bounds the exact rationale (as for a full chain of thought);
    `check_every` enables the convergence check. `seed` is unused (greedy, deterministic).
    """
    require_greedy(config, "FastCoT")
    prompt_ids = check_prompt(prompt_ids)
    check_fastcot_settings(window, max_iterations, max_answer_tokens, check_every)
    started, forwards_before = time.perf_counter(), target.forward_count
    stats = GenerationStats()
    trigger_ids = target.encode(trigger)
    attempts: list[tuple[list[int], FinishReason]] = []
    stopped_by = ""
    for state in jacobi_iterations(target, prompt_ids, config, window, init_ids or prompt_ids, stats):
        if state.ended is not None:
            stopped_by = state.ended
            break
        if check_every is not None and state.iteration % check_every == 0:
            attempts.append(
                generate_answer(
                    target, state.cache, prompt_ids, state.rationale, state.approximate, trigger_ids, check_answer_tokens
                )
            )
            if len(attempts) >= 2 and attempts[-1][0] == attempts[-2][0]:
                stopped_by = "converged"
                break
        if state.iteration >= max_iterations:
            stopped_by = "cap"
            break
    rationale = without_eos(state.rationale, target.eos_token_ids)
    if stopped_by == "converged" and attempts[-1][1] != "length":
        answer, reason = attempts[-1]  # the same greedy answer a fresh generation would give
    else:
        answer, reason = generate_answer(
            target, state.cache, prompt_ids, rationale, state.approximate, trigger_ids, max_answer_tokens
        )
    stats.new_tokens = len(rationale) + len(state.approximate) + len(answer)
    stats.target_forwards = target.forward_count - forwards_before
    stats.wall_seconds = time.perf_counter() - started
    return fastcot_output(state, rationale, trigger_ids, answer, reason, stats, stopped_by, [ids for ids, _ in attempts])


def without_eos(rationale: list[int], eos_token_ids: frozenset[int]) -> list[int]:
    """The rationale the answer follows: an EOS that ended it is not part of the text."""
    return [t for t in rationale if t not in eos_token_ids]


def fastcot_output(
    state: JacobiState, rationale: list[int], trigger_ids: list[int], answer: list[int], reason: FinishReason,
    stats: GenerationStats, stopped_by: str, answer_attempts: list[list[int]] | None = None,
) -> FastCoTOutput:
    """The exact rationale, the window's approximate tokens, the trigger and the answer, in order."""
    return FastCoTOutput(
        token_ids=rationale + state.approximate + trigger_ids + answer,
        finish_reason=reason,
        stats=stats,
        exact_ids=rationale,
        approximate_ids=state.approximate,
        trigger_ids=trigger_ids,
        answer_ids=answer,
        iterations=state.iteration,
        stopped_by=stopped_by,
        answer_attempts=answer_attempts or [],
    )


@dataclass
class CapResult:
    """FastCoT's result had its iteration cap been `cap`, with the wall time that run would take."""

    cap: int
    output: FastCoTOutput
    wall_seconds: float


def fastcot_at_caps(
    target: ModelRunner,
    prompt_ids: list[int],
    config: DecodeConfig,
    caps: list[int],
    window: int = 8,
    trigger: str = DEFAULT_TRIGGER,
    max_answer_tokens: int = 16,
    init_ids: list[int] | None = None,
) -> list[CapResult]:
    """FastCoT for several caps from ONE Jacobi trajectory (for calibration).

    The iterations do not depend on the cap, so the answer at cap c is generated from the state
    after c iterations (or from the end of the rationale if it ended earlier). Each result equals
    fastcot_decode with that cap; its wall time counts the iterations up to the cap + its answer.
    """
    require_greedy(config, "FastCoT")
    prompt_ids = check_prompt(prompt_ids)
    caps = sorted(set(caps))
    check_fastcot_settings(window, caps[0] if caps else 0, max_answer_tokens, None)
    trigger_ids = target.encode(trigger)
    stats = GenerationStats()
    started, forwards_before = time.perf_counter(), target.forward_count
    answers_seconds, answers_forwards = 0.0, 0  # spent on answers: not part of later caps' runs
    results: list[CapResult] = []
    pending_caps = list(caps)
    for state in jacobi_iterations(target, prompt_ids, config, window, init_ids or prompt_ids, stats):
        iteration_seconds = time.perf_counter() - started - answers_seconds
        iteration_forwards = target.forward_count - forwards_before - answers_forwards
        while pending_caps and (state.ended is not None or state.iteration >= pending_caps[0]):
            cap = pending_caps.pop(0)
            answer_started, answer_forwards_before = time.perf_counter(), target.forward_count
            rationale = without_eos(state.rationale, target.eos_token_ids)
            answer, reason = generate_answer(
                target, state.cache, prompt_ids, rationale, state.approximate, trigger_ids, max_answer_tokens
            )
            answer_seconds = time.perf_counter() - answer_started
            answer_forwards = target.forward_count - answer_forwards_before
            answers_seconds += answer_seconds
            answers_forwards += answer_forwards
            cap_stats = GenerationStats(
                new_tokens=len(rationale) + len(state.approximate) + len(answer),
                draft_tokens_proposed=stats.draft_tokens_proposed,
                draft_tokens_accepted=stats.draft_tokens_accepted,
                target_forwards=iteration_forwards + answer_forwards,
                wall_seconds=iteration_seconds + answer_seconds,
            )
            output = fastcot_output(state, rationale, trigger_ids, answer, reason, cap_stats, state.ended or "cap")
            results.append(CapResult(cap, output, cap_stats.wall_seconds))
        if not pending_caps:
            break
    return results
