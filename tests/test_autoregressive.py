"""Autoregressive decoding (the reference) and the serial executors, on the tiny float32 pair."""

from collections import Counter

import pytest
import torch
from scipy.stats import chisquare

from seed_tot.config import DecodeConfig
from seed_tot.decoding.autoregressive import autoregressive_decode, next_token
from seed_tot.decoding.sampling import probabilities
from seed_tot.errors import ConfigError
from seed_tot.requests import GenerationRequest
from seed_tot.scheduling.factory import make_executor
from seed_tot.scheduling.serial import SerialExecutor


def prompt_tokens(seed: int, n: int) -> list[int]:
    return torch.randint(0, 256, (n,), generator=torch.Generator().manual_seed(seed)).tolist()


def test_greedy_autoregressive_equals_transformers_generate(tiny_pair):
    _, target = tiny_pair
    for seed in range(5):
        prompt = prompt_tokens(400 + seed, 3 + 9 * seed)
        ours = autoregressive_decode(target, prompt, DecodeConfig(max_new_tokens=25))
        generated = target.model.generate(
            torch.tensor([prompt]),
            attention_mask=torch.ones(1, len(prompt), dtype=torch.long),
            max_new_tokens=25,
            do_sample=False,
            pad_token_id=target.pad_token_id,
        )[0, len(prompt) :].tolist()
        assert ours.token_ids == generated[: len(ours.token_ids)]
        assert len(ours.token_ids) == 25 or ours.token_ids[-1] in target.eos_token_ids
        assert ours.stats.target_forwards == ours.stats.new_tokens == len(ours.token_ids)


def test_sampling_is_reproducible_per_seed(tiny_pair):
    _, target = tiny_pair
    config = DecodeConfig(max_new_tokens=15, temperature=1.0, top_p=0.9)
    prompt = target.encode("Once upon a time")
    first = autoregressive_decode(target, prompt, config, seed=3).token_ids
    assert autoregressive_decode(target, prompt, config, seed=3).token_ids == first
    others = {tuple(autoregressive_decode(target, prompt, config, seed=s).token_ids) for s in range(4, 8)}
    assert others != {tuple(first)}


@pytest.mark.parametrize("temperature,top_p", [(1.0, 1.0), (0.7, 0.8)])
def test_next_token_samples_the_tempered_top_p_distribution(temperature, top_p):
    logits = torch.tensor([2.0, 1.0, 0.5, 0.0, -1.0, 1.5])
    exact = probabilities(logits, temperature, top_p)
    generator = torch.Generator().manual_seed(0)
    config = DecodeConfig(temperature=temperature, top_p=top_p)
    n = 20_000
    counts = Counter(next_token(logits, config, generator) for _ in range(n))
    support = [i for i in range(len(logits)) if exact[i] > 0]
    assert set(counts) <= set(support)
    observed = [counts.get(i, 0) for i in support]
    expected = [float(exact[i]) * n for i in support]
    expected = [e * n / sum(expected) for e in expected]
    assert chisquare(observed, expected).pvalue > 1e-3


def test_stop_string_ends_generation_at_the_first_completing_token(tiny_pair):
    _, target = tiny_pair
    prompt = target.encode("Hello world")
    free = autoregressive_decode(target, prompt, DecodeConfig(max_new_tokens=30)).token_ids
    stop = target.decode(free[7:9])
    assert stop
    out = autoregressive_decode(target, prompt, DecodeConfig(max_new_tokens=30, stop=(stop,)))
    assert out.finish_reason == "stop"
    assert stop in target.decode(out.token_ids)
    assert stop not in target.decode(out.token_ids[:-1])
    assert out.token_ids == free[: len(out.token_ids)]


def test_max_new_tokens_is_exact(tiny_pair):
    _, target = tiny_pair
    out = autoregressive_decode(target, [5, 6, 7], DecodeConfig(max_new_tokens=9))
    assert len(out.token_ids) == 9 and out.finish_reason == "length"


def requests_for(target) -> list[GenerationRequest]:
    texts = ["Hello", "The tree of thought", "x"]
    return [
        GenerationRequest(target.encode(t), DecodeConfig(max_new_tokens=12), seed=i, request_id=f"r{i}")
        for i, t in enumerate(texts)
    ]


def test_serial_executors_agree_greedily_and_keep_order(tiny_pair):
    draft, target = tiny_pair
    requests = requests_for(target)
    outputs = {}
    for executor in (
        make_executor("ar", target),
        make_executor("sd", target, draft, k=3),
        make_executor("mcsd", target, draft, k_config="2,2,1"),
    ):
        results = executor.run(requests)
        executor.close()
        assert [r.request_id for r in results] == ["r0", "r1", "r2"]
        for result in results:
            assert result.text == target.decode(result.token_ids)
            assert result.stats.new_tokens == len(result.token_ids)
            assert result.stats.wall_seconds > 0
        outputs[executor.name] = [r.token_ids for r in results]
    assert outputs["ar"] == outputs["sd(k=3)"] == outputs["mcsd(2, 2, 1)"]


def test_sampled_executor_results_follow_request_seeds(tiny_pair):
    draft, target = tiny_pair
    executor = make_executor("mcsd", target, draft, k_config=(2, 2, 1))
    request = GenerationRequest(target.encode("Hi"), DecodeConfig(max_new_tokens=10, temperature=1.0), seed=11)
    first = executor.run([request])[0].token_ids
    assert executor.run([request])[0].token_ids == first


def test_serial_executor_errors_are_clear(tiny_pair):
    draft, target = tiny_pair
    with pytest.raises(ConfigError, match="Unknown method"):
        make_executor("beam", target)
    with pytest.raises(ConfigError, match="needs a draft model"):
        make_executor("sd", target)
    with pytest.raises(ConfigError, match="k="):
        make_executor("sd", target, draft, k=0)
    assert isinstance(make_executor("ar", target), SerialExecutor)


def test_ignore_eos_makes_every_request_reach_max_new_tokens(tiny_pair, monkeypatch):
    """Benchmarks compare executors on equal lengths: with ignore_eos nobody stops at EOS,
    and the tokens up to where EOS would have stopped are the same."""
    from seed_tot.scheduling.batched import BatchedARExecutor

    _, target = tiny_pair
    prompt = prompt_tokens(77, 9)
    free = autoregressive_decode(target, prompt, DecodeConfig(max_new_tokens=20, temperature=1.0), seed=3)
    monkeypatch.setattr(target, "eos_token_ids", frozenset({free.token_ids[5]}))
    stopped = autoregressive_decode(target, prompt, DecodeConfig(max_new_tokens=20, temperature=1.0), seed=3)
    assert stopped.finish_reason == "eos" and len(stopped.token_ids) <= 6
    config = DecodeConfig(max_new_tokens=20, temperature=1.0, ignore_eos=True)
    ignoring = autoregressive_decode(target, prompt, config, seed=3)
    assert ignoring.token_ids == free.token_ids and ignoring.finish_reason == "length"
    batched = BatchedARExecutor(target).run([GenerationRequest(prompt, config, seed=3)] * 2)
    assert [r.token_ids for r in batched] == [free.token_ids] * 2
