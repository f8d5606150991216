"""Jacobi decoding equals greedy autoregressive decoding token for token (tiny pair, float32)."""

import pytest
import torch

from seed_tot.config import DecodeConfig
from seed_tot.decoding.autoregressive import autoregressive_decode
from seed_tot.decoding.jacobi import jacobi_decode, refill
from seed_tot.errors import ConfigError, SeedTotError
from seed_tot.runtime import ModelRunner


_REFERENCE_CACHE: dict = {}


def reference_greedy(target: ModelRunner, prompt: list[int], config: DecodeConfig) -> tuple[list[int], str]:
    """Greedy autoregressive decoding (the reference), memoised: the same prompts serve several settings."""
    key = (id(target.model), target.eos_token_ids, tuple(prompt), config)
    if key not in _REFERENCE_CACHE:
        _REFERENCE_CACHE[key] = _reference_greedy(target, prompt, config)
    return _REFERENCE_CACHE[key]


def _reference_greedy(target: ModelRunner, prompt: list[int], config: DecodeConfig) -> tuple[list[int], str]:
    out = autoregressive_decode(target, prompt, config, seed=0)
    return out.token_ids, out.finish_reason


def prompt_cases(count: int, seed: int) -> list[tuple[list[int], int]]:
    """(prompt ids, max_new_tokens) with prompt lengths 1..48 and budgets 1..64."""
    g = torch.Generator().manual_seed(seed)
    cases = []
    for i in range(count):
        length = int(torch.randint(1, 49, (), generator=g))
        budget = int(torch.randint(1, 65, (), generator=g)) if i % 5 else 64
        cases.append((torch.randint(0, 256, (length,), generator=g).tolist(), budget))
    return cases


def with_eos(target: ModelRunner, eos: int) -> ModelRunner:
    runner = ModelRunner(target.model, target.tokenizer, "tiny-target-eos")
    runner.eos_token_ids = frozenset({eos})
    return runner


def check_equal_to_reference(decode, target, cases, **params):
    for prompt, budget in cases:
        config = DecodeConfig(max_new_tokens=budget)
        expected, reason = reference_greedy(target, prompt, config)
        out = decode(target, prompt, config, seed=1, **params)
        assert out.token_ids == expected, (prompt, budget, params)
        assert out.finish_reason == reason
        assert out.stats.new_tokens == len(expected)


@pytest.mark.parametrize("block_size", [2, 4, 8])
def test_jacobi_equals_greedy_on_many_prompts(tiny_pair, block_size):
    check_equal_to_reference(jacobi_decode, tiny_pair[1], prompt_cases(30, seed=11), block_size=block_size)


@pytest.mark.parametrize("block_size", [2, 4, 8])
def test_jacobi_stops_at_eos_and_stop_strings_like_greedy(tiny_pair, block_size):
    target = tiny_pair[1]
    for prompt, _ in prompt_cases(6, seed=12):
        free, _ = reference_greedy(target, prompt, DecodeConfig(max_new_tokens=40))
        eos_runner = with_eos(target, free[len(free) // 2])
        check_equal_to_reference(jacobi_decode, eos_runner, [(prompt, 40)], block_size=block_size)
        assert reference_greedy(eos_runner, prompt, DecodeConfig(max_new_tokens=40))[1] == "eos"
        stop_text = target.decode(free[10:12])
        config = DecodeConfig(max_new_tokens=40, stop=(stop_text,))
        expected, reason = reference_greedy(target, prompt, config)
        out = jacobi_decode(target, prompt, config, block_size=block_size)
        assert (out.token_ids, out.finish_reason) == (expected, reason)


def test_jacobi_stats_count_forwards_and_guesses(tiny_pair):
    target = tiny_pair[1]
    prompt = list(b"The quick brown fox jumps over the lazy dog. ")
    out = jacobi_decode(target, prompt, DecodeConfig(max_new_tokens=48), block_size=4)
    stats = out.stats
    # one prefill plus one forward per iteration; each iteration accepts matched guesses + 1 token
    iterations = stats.target_forwards - 1
    assert stats.new_tokens == 48
    assert iterations <= 48 and stats.draft_tokens_accepted >= 48 - iterations
    assert stats.draft_tokens_proposed <= 3 * iterations
    assert stats.wall_seconds > 0


def test_jacobi_refuses_a_bad_block(tiny_pair):
    with pytest.raises(ConfigError, match="block size"):
        jacobi_decode(tiny_pair[1], [1, 2, 3], DecodeConfig(), block_size=0)
    with pytest.raises(SeedTotError, match="empty"):
        jacobi_decode(tiny_pair[1], [], DecodeConfig())


def test_refill():
    assert refill([1, 2], 4) == [1, 2, 2, 2]
    assert refill([1, 2, 3], 2) == [1, 2]
