"""Batched executors: greedy output equals autoregressive decoding, sampling is the target's
distribution, rows do not influence each other (tiny float32 pair)."""

import numpy as np
import pytest
import torch
from scipy.stats import chisquare

from seed_tot.config import DecodeConfig
from seed_tot.decoding.autoregressive import autoregressive_decode
from seed_tot.decoding.sampling import probabilities
from seed_tot.decoding.drafters import speculative_decode
from seed_tot.errors import ConfigError, TokenizerMismatchError
from seed_tot.models.tiny import build_tiny_pair
from seed_tot.runtime import ModelRunner
from seed_tot.decoding.drafters import lookup_continuation
from seed_tot.scheduling.batched import BatchedARExecutor, BatchedSpeculativeExecutor
from seed_tot.requests import GenerationRequest

TEXTS = [
    "Hello world",
    "The quick brown fox jumps",
    "Hello world",
    "a",
    "Q: 3 apples and 4 pears. How many fruits?",
    "Hello world",
    "zz",
    "Tree of thoughts: step 1 of 4,",
]


def requests_for(tokenizer, config=None, texts=TEXTS, lengths=(24, 17, 24, 9, 30, 5, 24, 12)):
    out = []
    for i, text in enumerate(texts):
        cfg = config or DecodeConfig(max_new_tokens=lengths[i % len(lengths)])
        out.append(GenerationRequest(tokenizer.encode(text), cfg, seed=100 + i, request_id=f"r{i}"))
    return out


def reference(target, requests):
    return [autoregressive_decode(target, r.prompt_ids, r.config, r.seed).token_ids for r in requests]


@pytest.mark.parametrize("share_prefix", [True, False])
def test_batched_ar_greedy_equals_ar(tiny_pair, share_prefix):
    draft, target = tiny_pair
    requests = requests_for(target.tokenizer)
    results = BatchedARExecutor(target, share_prefix=share_prefix).run(requests)
    assert [r.token_ids for r in results] == reference(target, requests)
    assert [r.request_id for r in results] == [r.request_id for r in requests]
    assert all(r.finish_reason == "length" and r.stats.new_tokens == len(r.token_ids) for r in results)
    assert results[0].text == target.decode(results[0].token_ids)


@pytest.mark.parametrize(
    "k_config, options",
    [
        ((1,), {}),
        ((1, 1, 1), {"share_prefix": False}),
        ((2, 2, 1), {}),
        ((3, 2, 1), {"compact_slack": 0}),
        ((1, 1), {"adaptive_k": True, "max_k": 6}),
        ((2, 1, 1, 1, 1, 1), {"adaptive_k": True}),
    ],
)
def test_batched_sd_greedy_equals_ar(tiny_pair, k_config, options):
    draft, target = tiny_pair
    requests = requests_for(target.tokenizer)
    executor = BatchedSpeculativeExecutor(target, draft, k_config, **options)
    results = executor.run(requests)
    assert [r.token_ids for r in results] == reference(target, requests)
    proposed = sum(r.stats.draft_tokens_proposed for r in results)
    accepted = sum(r.stats.draft_tokens_accepted for r in results)
    assert 0 < accepted <= proposed
    # speculation really happened: fewer target forwards than tokens
    assert sum(r.stats.target_forwards for r in results) < sum(r.stats.new_tokens for r in results)
    assert set(executor.last_timing) == {"wall_seconds", "target_seconds", "draft_seconds"}


@pytest.mark.parametrize("options", [{}, {"adaptive_k": True, "max_ngram": 2}, {"min_ngram": 2}])
def test_batched_lookup_greedy_equals_ar(tiny_pair, options):
    draft, target = tiny_pair
    requests = requests_for(target.tokenizer)
    # A request that starts 6 tokens further along another's greedy path: the lagging row can
    # draft from it, so lookups get accepted.
    ahead = requests[4].prompt_ids + reference(target, requests[4:5])[0][:6]
    requests.append(GenerationRequest(ahead, DecodeConfig(max_new_tokens=20), seed=7))
    executor = BatchedSpeculativeExecutor(target, None, (1, 1, 1, 1), drafter="lookup", **options)
    results = executor.run(requests)
    assert [r.token_ids for r in results] == reference(target, requests)
    assert results[4].stats.draft_tokens_accepted >= 6


def test_lookup_continuation_prefers_own_context_then_other_rows():
    assert lookup_continuation([1, 2, 3, 9, 1, 2], 3, 3, 1, others=[]) == [3, 9, 1]
    assert lookup_continuation([7, 8], 2, 3, 1, others=[[5, 7, 8, 4, 4, 4]]) == [4, 4]
    assert lookup_continuation([1, 2, 3], 5, 3, 1, others=[[0, 1, 2, 3, 6]]) == [6]  # longest n-gram wins
    assert lookup_continuation([1, 2], 4, 3, 1, others=[[3, 4]]) == []
    assert lookup_continuation([1, 2, 1], 0, 3, 1, others=[]) == []
    assert lookup_continuation([1, 2, 3, 9, 5, 3], 2, 3, 1) == [9, 5]
    assert lookup_continuation([1, 2, 3, 9, 5, 3], 2, 3, 2) == []  # only a one-token match


def test_batched_lookup_refuses_bad_ngram_sizes(tiny_pair):
    _, target = tiny_pair
    with pytest.raises(ConfigError, match="min_ngram"):
        BatchedSpeculativeExecutor(target, None, (1, 1), drafter="lookup", min_ngram=3, max_ngram=2)


def test_batched_sd_greedy_equals_ar_with_eager_attention(tiny_eager_pair):
    draft, target = tiny_eager_pair
    requests = requests_for(target.tokenizer)[:4]
    results = BatchedSpeculativeExecutor(target, draft, (2, 2, 1)).run(requests)
    assert [r.token_ids for r in results] == reference(target, requests)


def test_eos_and_stop_strings_end_rows_where_ar_ends(tiny_pair):
    draft, target = tiny_pair
    plain = requests_for(target.tokenizer, DecodeConfig(max_new_tokens=30))
    free_run = reference(target, plain)
    # Pretend a token that the target emits mid-sequence is EOS (a copy of the runner).
    eos = free_run[1][7]
    eos_target = ModelRunner(target.model, target.tokenizer, "tiny-target-eos")
    eos_target.eos_token_ids = frozenset({eos})
    stop_text = target.decode(free_run[4][5:8])
    requests = [
        GenerationRequest(r.prompt_ids, DecodeConfig(max_new_tokens=30, stop=(stop_text,)), seed=r.seed)
        for r in plain
    ]
    expected = reference(eos_target, requests)
    assert any(len(tokens) < 30 for tokens in expected)
    for executor in (BatchedARExecutor(eos_target), BatchedSpeculativeExecutor(eos_target, draft, (2, 2, 1))):
        results = executor.run(requests)
        assert [r.token_ids for r in results] == expected
        reasons = {r.finish_reason for r in results}
        assert "eos" in reasons and "stop" in reasons


def test_sampling_follows_the_serial_decoders_random_stream(tiny_pair):
    """Same seed, same generator use: batched sampled output equals the serial decoders'."""
    draft, target = tiny_pair
    config = DecodeConfig(max_new_tokens=20, temperature=1.0, top_p=0.9)
    requests = requests_for(target.tokenizer, config)
    ar = BatchedARExecutor(target).run(requests)
    assert [r.token_ids for r in ar] == reference(target, requests)
    sd = BatchedSpeculativeExecutor(target, draft, (2, 2, 1)).run(requests)
    serial = [speculative_decode(draft, target, r.prompt_ids, config, (2, 2, 1), r.seed).token_ids for r in requests]
    assert [r.token_ids for r in sd] == serial


def test_rows_do_not_depend_on_each_other(tiny_pair):
    draft, target = tiny_pair
    sampled = DecodeConfig(max_new_tokens=16, temperature=0.8)
    greedy = DecodeConfig(max_new_tokens=10)
    mixed = [
        GenerationRequest(target.tokenizer.encode("Hello world"), sampled, seed=1),
        GenerationRequest(target.tokenizer.encode("Hello world"), greedy, seed=2),
        GenerationRequest(target.tokenizer.encode("Something else"), sampled, seed=3),
    ]
    executor = BatchedSpeculativeExecutor(target, draft, (2, 1))
    together = [r.token_ids for r in executor.run(mixed)]
    alone = [executor.run([r])[0].token_ids for r in mixed]
    assert together == alone
    assert together[1] == reference(target, [mixed[1]])[0]


def exact_joint(target: ModelRunner, prompt: list[int], temperature: float, top_p: float) -> np.ndarray:
    """P(first two new tokens) by enumeration from the target's logits."""
    vocab = target.vocab_size
    first = probabilities(target.forward(torch.tensor([prompt]))[0, -1], temperature, top_p)
    batch = torch.tensor([prompt + [x] for x in range(vocab)])
    second = probabilities(target.forward(batch)[:, -1], temperature, top_p)
    return (first[:, None] * second).double().numpy().ravel()


def chi_square_p(counts: np.ndarray, expected_probs: np.ndarray) -> float:
    """Chi-square goodness of fit, merging outcomes whose expected count is below 5 into one bin."""
    expected = expected_probs * counts.sum()
    small = expected < 5
    obs = np.append(counts[~small], counts[small].sum())
    exp = np.append(expected[~small], expected[small].sum())
    if exp[-1] == 0:
        obs, exp = obs[:-1], exp[:-1]
    return float(chisquare(obs, exp * obs.sum() / exp.sum()).pvalue)


@pytest.mark.parametrize(
    "k_config, temperature, top_p, options",
    [
        ((2, 2, 1), 1.0, 1.0, {}),
        ((1, 1, 1), 0.6, 0.9, {"adaptive_k": True}),
        ((1, 1), 1.0, 1.0, {"drafter": "lookup"}),
    ],
)
def test_batched_sd_samples_the_target_distribution(small_vocab_pair, k_config, temperature, top_p, options):
    draft, target = small_vocab_pair(seed=3)
    prompt = [1, 5, 2, 1, 5, 7, 1]
    config = DecodeConfig(max_new_tokens=2, temperature=temperature, top_p=top_p)
    executor = BatchedSpeculativeExecutor(target, draft, k_config, **options)
    counts = np.zeros(64)
    # lookup searches every other row of the batch: smaller batches keep that quadratic cost low
    samples, per_batch = 20_000, 100 if options.get("drafter") == "lookup" else 1_000
    proposed = accepted = 0
    for start in range(0, samples, per_batch):
        requests = [GenerationRequest(prompt, config, seed=start + i) for i in range(per_batch)]
        for result in executor.run(requests):
            counts[result.token_ids[0] * 8 + result.token_ids[1]] += 1
            proposed += result.stats.draft_tokens_proposed
            accepted += result.stats.draft_tokens_accepted
    assert 0 < accepted < proposed  # drafts are accepted and rejected: both paths are exercised
    assert chi_square_p(counts, exact_joint(target, prompt, temperature, top_p)) > 0.001


def test_user_errors_are_one_sentence(tiny_pair):
    draft, target = tiny_pair
    with pytest.raises(ConfigError, match="empty prompt"):
        BatchedARExecutor(target).run([GenerationRequest([], DecodeConfig())])
    with pytest.raises(ConfigError, match="k_config"):
        BatchedSpeculativeExecutor(target, draft, "2,0")
    other_draft, _, _ = build_tiny_pair(seed=1, vocab_size=300)
    with pytest.raises(TokenizerMismatchError):
        BatchedSpeculativeExecutor(target, ModelRunner(other_draft, None, "no-tokenizer"))
    assert BatchedARExecutor(target).run([]) == []
