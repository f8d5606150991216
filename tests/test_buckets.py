"""Length buckets of a ragged prefill: the split is the cheapest by its cost model, and a
bucketed prefill gives every row its own logits and KV (tiny float32 pair)."""

import itertools
import random

import pytest
import torch

import seed_tot.scheduling.batched.prefill as batched_prefill
from seed_tot.config import DecodeConfig
from seed_tot.requests import GenerationRequest
from seed_tot.scheduling.batched import BatchedARExecutor
from seed_tot.scheduling.batched.prefill import prefill
from seed_tot.scheduling.buckets import bucketed_cost, length_buckets
from test_batched import reference


def cost(widths, buckets, overhead):
    return sum(overhead + len(b) * max(widths[i] for i in b) for b in buckets if max(widths[i] for i in b))


def brute_force_cost(widths, overhead):
    """Least cost over every split of the sorted rows into runs."""
    order = sorted(range(len(widths)), key=lambda i: widths[i])
    best = None
    for cuts in itertools.product([False, True], repeat=len(order) - 1):
        runs, run = [], [order[0]]
        for cut, index in zip(cuts, order[1:]):
            if cut:
                runs.append(run)
                run = []
            run.append(index)
        runs.append(run)
        total = cost(widths, runs, overhead)
        best = total if best is None else min(best, total)
    return best


def test_short_rows_leave_a_long_rows_forward():
    widths = [40, 1000, 35, 38]
    buckets = length_buckets(widths, overhead=10)
    assert sorted(map(sorted, buckets)) == [[0, 2, 3], [1]]
    assert bucketed_cost(widths, overhead=10) == 10 + 3 * 40 + 10 + 1000 < 4 * 1000


def test_similar_rows_share_one_forward_and_empty_rows_need_none():
    assert length_buckets([50, 52, 51], overhead=10) == [[0, 2, 1]]
    assert bucketed_cost([0, 0], overhead=10) == 0
    assert sorted(map(sorted, length_buckets([0, 30, 0], overhead=10))) == [[0, 2], [1]]


@pytest.mark.parametrize("seed", range(20))
def test_buckets_are_the_cheapest_split(seed):
    rng = random.Random(seed)
    widths = [rng.choice([0, 1, 3, 20, 200, 900]) + rng.randint(0, 5) for _ in range(rng.randint(1, 9))]
    overhead = rng.choice([0, 10, 100])
    buckets = length_buckets(widths, overhead)
    assert sorted(i for b in buckets for i in b) == list(range(len(widths)))
    assert cost(widths, buckets, overhead) == bucketed_cost(widths, overhead) == brute_force_cost(widths, overhead)


def mixed_length_prompts(target):
    long_text = "Evaluate each step of the solution below and say sure, likely or impossible. " * 6
    return [target.encode(t) for t in ["Short one.", long_text + "Step: 2+2=4.", "Tiny", long_text + "Step: 3*3=9?"]]


def mixed_length_requests(target):
    config = DecodeConfig(max_new_tokens=12, temperature=0.0)
    return [GenerationRequest(p, config, seed=i, request_id=f"m{i}") for i, p in enumerate(mixed_length_prompts(target))]


def test_bucketed_prefill_gives_each_prompts_own_logits_and_kv(tiny_pair):
    _, target = tiny_pair
    prompts = mixed_length_prompts(target)
    assert len(length_buckets([len(p) for p in prompts])) == 2
    batch, logits = prefill(target, prompts, share_prefix=False)
    assert batch.lengths == [len(p) for p in prompts]
    for row, prompt in enumerate(prompts):
        alone_batch, alone = prefill(target, [prompt], share_prefix=False)
        torch.testing.assert_close(logits[row], alone[0], atol=1e-4, rtol=1e-4)
        for (k, v), (k1, v1) in zip(batch.committed_kv(row), alone_batch.committed_kv(0)):
            torch.testing.assert_close(k, k1, atol=1e-4, rtol=1e-4)
            torch.testing.assert_close(v, v1, atol=1e-4, rtol=1e-4)


def test_greedy_with_bucketed_prefill_equals_autoregressive(tiny_pair):
    _, target = tiny_pair
    requests = mixed_length_requests(target)
    results = BatchedARExecutor(target, share_prefix=False, prefix_cache_mb=0).run(requests)
    assert [r.token_ids for r in results] == reference(target, requests)


def test_check_catches_buckets_put_back_in_the_wrong_order(tiny_pair, monkeypatch):
    """Negative control: bucketed rows rejoined in bucket order instead of the batch's order
    (so a row continues another prompt) must fail the greedy equality check above."""
    _, target = tiny_pair
    real_select = batched_prefill.RaggedBatchCache.select

    def no_reorder(self, rows):
        if sorted(rows) == list(range(self.batch_size)) and rows != list(range(self.batch_size)):
            return None  # skips putting the rows back in order
        return real_select(self, rows)

    monkeypatch.setattr(batched_prefill.RaggedBatchCache, "select", no_reorder)
    requests = mixed_length_requests(target)
    results = BatchedARExecutor(target, share_prefix=False, prefix_cache_mb=0).run(requests)
    assert [r.token_ids for r in results] != reference(target, requests)
