"""Prompt KV kept across executor calls (tiny float32 pair): the LRU keeps what it should, a
later call that starts from kept KV decodes exactly as autoregressive decoding, and a cache
that hands out the wrong positions is caught."""

import pytest
import torch

import seed_tot.scheduling.batched.prefill as batched_prefill
from seed_tot.config import DecodeConfig
from seed_tot.requests import GenerationRequest
from seed_tot.scheduling.batched import BatchedARExecutor, BatchedSpeculativeExecutor
from seed_tot.scheduling.batched.prefill import prefill
from seed_tot.scheduling.prefix_cache import NODE_BYTES, PrefixCache, PrefixMatch, kv_bytes
from test_batched import reference

QUESTION = "Question: Ann has 3 apples and buys 4 more bags of 5 apples each. How many apples now?\nSteps so far:\n"
FIRST_ROUND = [QUESTION + s + "\nVerdict:" for s in ("4*5=20.", "3+4=7.", "She buys bags.")]
# The next depth: the same question and a longer path, then new steps (as a tree search sends them).
SECOND_ROUND = [QUESTION + "4*5=20.\n" + s + "\nVerdict:" for s in ("20+3=23.", "20*3=60.", "The answer is 23.")]


def kv(length: int, width: int = 4) -> list[tuple[torch.Tensor, torch.Tensor]]:
    keys = torch.arange(length, dtype=torch.float32).reshape(1, 1, length, 1).expand(1, 1, length, width)
    return [(keys.clone(), keys.clone())]


def test_match_is_the_longest_kept_prefix_and_leaves_one_token():
    cache = PrefixCache(budget_bytes=10**6)
    cache.add([1, 2, 3, 4, 5], kv(5))
    cache.add([1, 2, 9], kv(3))
    match = cache.match([1, 2, 3, 4, 7, 8])
    assert match.length == 4 and match.kv[0][0].shape[2] == 4
    assert cache.match([1, 2, 3, 4, 5]).length == 4  # the last token is always computed
    assert cache.match([7, 1, 2]).length == 0 and cache.match([7, 1, 2]).kv is None


def test_add_skips_covered_prompts_and_replaces_the_ones_it_extends():
    cache = PrefixCache(budget_bytes=10**6)
    cache.add([1, 2, 3], kv(3))
    cache.add([1, 2, 3, 4], kv(4))
    cache.add([1, 2], kv(2))
    assert list(cache.entries) == [(1, 2, 3, 4)]
    assert cache.kv_bytes == kv_bytes(kv(4)) and cache.nodes == 4
    assert cache.bytes == kv_bytes(kv(4)) + 4 * NODE_BYTES  # the index counts against the budget too


def test_least_recently_used_prompts_leave_first_within_the_budget():
    cache = PrefixCache(budget_bytes=2 * (kv_bytes(kv(10)) + 10 * NODE_BYTES))
    cache.add(list(range(10)), kv(10))
    cache.add(list(range(100, 110)), kv(10))
    cache.match(list(range(8)))  # touches the first prompt
    cache.add(list(range(200, 210)), kv(10))
    assert set(cache.entries) == {tuple(range(10)), tuple(range(200, 210))}
    assert cache.bytes <= cache.budget_bytes
    cache.add(list(range(300, 400)), kv(100))  # bigger than the whole budget: not kept
    assert tuple(range(300, 400)) not in cache.entries


def brute_force_match(entries, prompt):
    """The longest shared prefix over every kept prompt, at most len(prompt) - 1: what the index must find."""
    best = 0
    for key in entries:
        length = 0
        while length < min(len(key), len(prompt) - 1) and key[length] == prompt[length]:
            length += 1
        best = max(best, length)
    return best


def test_the_index_finds_what_a_scan_of_every_kept_prompt_finds():
    import random

    rng = random.Random(7)
    stems = [[rng.randrange(5) for _ in range(rng.randrange(1, 12))] for _ in range(6)]
    cache = PrefixCache(budget_bytes=40 * (kv_bytes(kv(30)) + 30 * NODE_BYTES))
    for _ in range(400):
        prompt = rng.choice(stems) + [rng.randrange(5) for _ in range(rng.randrange(0, 18))]
        if rng.random() < 0.5:
            match = cache.match(prompt)
            assert match.length == brute_force_match(cache.entries, prompt)
            if match.length:  # the positions handed out are the prompt's own: kv(n) holds 0..n-1
                assert match.kv[0][0][0, 0, :, 0].tolist() == list(range(match.length))
        else:
            cache.add(prompt, kv(len(prompt)))
            assert cache.covers(prompt)
        prefixes = {key[:n] for key in cache.entries for n in range(1, len(key) + 1)}
        assert cache.nodes == len(prefixes)  # the index holds exactly the kept prompts' prefixes
        assert not any(a != b and b[: len(a)] == a for a in cache.entries for b in cache.entries)  # none covers another
        assert cache.bytes <= cache.budget_bytes


def test_prefill_from_kept_prefixes_gives_each_prompts_own_logits(tiny_pair):
    _, target = tiny_pair
    cache = PrefixCache(budget_bytes=2**30)
    prefill(target, [target.encode(t) for t in FIRST_ROUND], share_prefix=True, prefix_cache=cache)
    prompts = [target.encode(t) for t in SECOND_ROUND] + [target.encode("Unrelated prompt, no kept prefix.")]
    _, kept = prefill(target, prompts, share_prefix=True, prefix_cache=cache)
    _, alone = prefill(target, prompts, share_prefix=False)
    assert cache.reused_tokens > 3 * 20
    torch.testing.assert_close(kept, alone, atol=1e-4, rtol=1e-4)


def requests_for(runner, texts, temperature=0.0, seed=0):
    config = DecodeConfig(max_new_tokens=10, temperature=temperature)
    return [GenerationRequest(runner.encode(t), config, seed=seed + i, request_id=f"r{i}") for i, t in enumerate(texts)]


EXECUTORS = {
    "batched": lambda draft, target, mb: BatchedARExecutor(target, prefix_cache_mb=mb),
    "batched-mcsd": lambda draft, target, mb: BatchedSpeculativeExecutor(target, draft, (2, 2, 1), prefix_cache_mb=mb),
    "batched-lookup": lambda draft, target, mb: BatchedSpeculativeExecutor(
        target, None, (1, 1, 1), drafter="lookup", prefix_cache_mb=mb),
}


@pytest.mark.parametrize("method", sorted(EXECUTORS))
def test_greedy_from_kept_prefixes_equals_autoregressive(tiny_pair, method):
    draft, target = tiny_pair
    executor = EXECUTORS[method](draft, target, 64)
    executor.run(requests_for(target, FIRST_ROUND))
    second = requests_for(target, SECOND_ROUND)
    results = executor.run(second)
    assert executor.prefix_cache.reused_tokens > 0  # the second call's prefill did start from kept KV
    assert [r.token_ids for r in results] == reference(target, second)


def test_sampling_from_kept_prefixes_follows_each_requests_seed(tiny_pair):
    _, target = tiny_pair
    cached, uncached = BatchedARExecutor(target, prefix_cache_mb=64), BatchedARExecutor(target, prefix_cache_mb=0)
    for texts in (FIRST_ROUND, SECOND_ROUND):
        requests = requests_for(target, texts, temperature=1.0, seed=11)
        assert [r.token_ids for r in cached.run(requests)] == [r.token_ids for r in uncached.run(requests)]
    assert cached.prefix_cache.reused_tokens > 0 and uncached.prefix_cache is None


def test_check_catches_a_cache_that_hands_out_shifted_positions(tiny_pair, monkeypatch):
    """Negative control: a match whose KV starts one position late (the prefix's tokens 1..m
    instead of 0..m-1) must fail the greedy equality check above."""
    _, target = tiny_pair
    real_match = PrefixCache.match

    def shifted(self, prompt):
        match = real_match(self, prompt)
        if match.kv is None:
            return match
        longer = real_match(self, prompt + [0])  # same entry, one more position when it has one
        kv = [(k[:, :, 1 : match.length + 1], v[:, :, 1 : match.length + 1]) for k, v in longer.kv]
        return PrefixMatch(kv[0][0].shape[2], kv)

    monkeypatch.setattr(batched_prefill.PrefixCache, "match", shifted)
    executor = BatchedARExecutor(target, prefix_cache_mb=64)
    executor.run(requests_for(target, FIRST_ROUND))
    second = requests_for(target, SECOND_ROUND)
    assert [r.token_ids for r in executor.run(second)] != reference(target, second)


def test_a_negative_budget_is_one_clear_error(tiny_pair):
    from seed_tot.errors import ConfigError

    _, target = tiny_pair
    with pytest.raises(ConfigError, match="prefix_cache_mb"):
        BatchedARExecutor(target, prefix_cache_mb=-1)
