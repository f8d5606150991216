"""Jacobi trajectories for CLLM training: the model's own greedy Jacobi iteration, block by block.

A block is n tokens after a context (the prompt plus the blocks before it). Its Jacobi state
starts at a guess and each iteration replaces it by the greedy outputs of one forward over the
context and the state; the iteration ends at the fixed point, which is the model's greedy
autoregressive continuation. decoding.jacobi's step is that iteration with the converged prefix
committed to the KV cache, so a block's full state after a step is the tokens committed in the
block plus the step's next guesses (the last guess is never fed: its output lies past the block).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch

from seed_tot.config import DecodeConfig
from seed_tot.decoding.jacobi import initial_guesses, jacobi_step, start_pending
from seed_tot.errors import ConfigError
from seed_tot.runtime import ModelRunner


@dataclass
class BlockTrajectory:
    prompt_id: str
    context_ids: list[int]  # prompt + earlier blocks' fixed points
    prompt_length: int  # how many of context_ids are the prompt (the rest the model generated)
    states: list[list[int]]  # Jacobi states before convergence (the guess first), each as long as fixed_point
    fixed_point: list[int]  # the greedy continuation (ends at EOS when the model stopped)
    forwards: int = 0  # forwards the block took (one per state)

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, row: dict) -> "BlockTrajectory":
        return cls(**row)


def _cut_after_eos(tokens: list[int], eos: frozenset[int]) -> list[int]:
    for i, token in enumerate(tokens):
        if token in eos:
            return tokens[: i + 1]
    return tokens


def collect_trajectories(
    runner: ModelRunner, prompt_ids: list[int], block_size: int, max_new_tokens: int, prompt_id: str = ""
) -> list[BlockTrajectory]:
    """Greedy Jacobi decoding of `prompt_ids` in fixed blocks of `block_size` tokens (the last may
    be shorter), recording every block's intermediate states and its fixed point."""
    if block_size < 2:
        raise ConfigError(f"A CLLM block of {block_size} token(s) has no Jacobi iteration: use 2 or more.")
    if not prompt_ids:
        raise ConfigError("Cannot collect a Jacobi trajectory for an empty prompt.")
    config, generator = DecodeConfig(max_new_tokens=max_new_tokens), torch.Generator()
    cache, pending = start_pending(runner, prompt_ids)
    generated: list[int] = []
    blocks = []
    while len(generated) < max_new_tokens:
        n = min(block_size, max_new_tokens - len(generated))
        context = list(prompt_ids) + generated
        state = initial_guesses(context, n)
        committed: list[int] = []
        states = [state]
        while len(committed) < n:
            step = jacobi_step(runner, cache, pending, state[len(committed) : n - 1], config, generator)
            committed += step.accepted
            pending = committed[-1]
            state = committed + step.next_guesses
            if len(committed) < n:
                states.append(state)
        fixed_point = _cut_after_eos(committed[:n], runner.eos_token_ids)
        states = [s[: len(fixed_point)] for s in states]
        blocks.append(BlockTrajectory(prompt_id, context, len(prompt_ids), states, fixed_point, len(states)))
        generated += fixed_point
        if len(fixed_point) < n or fixed_point[-1] in runner.eos_token_ids:
            break
    return blocks
