"""Shared-prefix prefill: the plan is cheaper by its own cost model, and decoding stays lossless
(greedy equals autoregressive decoding, logits equal a separate prefill; tiny float32 pair)."""

import pytest
import torch

import seed_tot.scheduling.batched.prefill as batched_prefill
from seed_tot.config import DecodeConfig
from seed_tot.requests import GenerationRequest
from seed_tot.scheduling.batched import BatchedARExecutor, BatchedSpeculativeExecutor
from seed_tot.scheduling.batched.prefill import prefill
from seed_tot.scheduling.prefix_plan import plan_cost, plan_prefix_sharing, stage_cost
from test_batched import reference

QUESTIONS = [
    "Question: Ann has 3 apples and buys 4 more bags of 5 apples each. How many apples now?\nSteps so far:\n",
    "Question: A train leaves at 3 pm at 60 km/h; a second one at 4 pm at 80 km/h. When does it catch up?\nSteps:\n",
]
STEPS = ["4*5=20, 20+3=23.", "She has 23 apples.", "3+4=7 (wrong).", "1 hour head start: 60 km."]


def shared_prefix_texts() -> list[str]:
    return [q + s + "\nVerdict:" for q in QUESTIONS for s in STEPS]


def shared_prefix_requests(runner, max_new_tokens=12, temperature=0.0):
    config = DecodeConfig(max_new_tokens=max_new_tokens, temperature=temperature)
    return [
        GenerationRequest(runner.encode(text), config, seed=7 + i, request_id=f"p{i}")
        for i, text in enumerate(shared_prefix_texts())
    ]


def test_plan_groups_prompts_by_their_common_prefix():
    prefix_a, prefix_b = list(range(100, 160)), list(range(200, 250))
    prompts = [prefix_a + [1, 2, 3], prefix_b + [4], prefix_a + [5], prefix_b + [6, 7]]
    plan = plan_prefix_sharing(prompts)
    assert sorted((length, sorted(members)) for length, members in plan) == [(50, [1, 3]), (60, [0, 2])]
    assert plan_cost(prompts, plan) < stage_cost([len(p) for p in prompts])


def test_no_plan_without_a_common_prefix_worth_a_second_forward():
    assert plan_prefix_sharing([[1, 2, 3, 4], [5, 6, 7, 8], [9, 10, 11]]) is None
    assert plan_prefix_sharing([[1] * 40 + [2]]) is None
    assert plan_prefix_sharing([[1, 2], []]) is None


def test_every_prompt_keeps_a_token_for_stage_two():
    prompts = [list(range(30)), list(range(30)) + [99], list(range(30)) + [98, 97]]
    plan = plan_prefix_sharing(prompts)
    assert plan is not None
    for length, members in plan:
        assert all(length < len(prompts[i]) for i in members)


def test_two_stage_prefill_gives_each_prompts_own_logits(tiny_pair):
    _, target = tiny_pair
    prompts = [r.prompt_ids for r in shared_prefix_requests(target)]
    prompts.insert(2, prompts[5])  # a duplicate as well
    assert plan_prefix_sharing(list(map(list, dict.fromkeys(map(tuple, prompts))))) is not None
    _, shared = prefill(target, prompts, share_prefix=True)
    _, alone = prefill(target, prompts, share_prefix=False)
    torch.testing.assert_close(shared, alone, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("make", [
    lambda draft, target: BatchedARExecutor(target),
    lambda draft, target: BatchedSpeculativeExecutor(target, draft, (2, 2, 1)),
    lambda draft, target: BatchedSpeculativeExecutor(target, None, (1, 1, 1), drafter="lookup"),
])
def test_greedy_with_shared_prefixes_equals_autoregressive(tiny_pair, make):
    draft, target = tiny_pair
    requests = shared_prefix_requests(target)
    results = make(draft, target).run(requests)
    assert [r.token_ids for r in results] == reference(target, requests)
    assert [r.request_id for r in results] == [r.request_id for r in requests]


def test_sampling_with_shared_prefixes_follows_each_requests_seed(tiny_pair):
    _, target = tiny_pair
    requests = shared_prefix_requests(target, temperature=1.0)
    shared = BatchedARExecutor(target, share_prefix=True).run(requests)
    alone = BatchedARExecutor(target, share_prefix=False).run(requests)
    assert [r.token_ids for r in shared] == [r.token_ids for r in alone]


def test_check_catches_a_plan_that_claims_too_long_a_prefix(tiny_pair, monkeypatch):
    """Negative control: stage 1 computing two tokens past the true common prefix (so rows get
    another prompt's tokens) must fail the greedy equality check above."""
    _, target = tiny_pair
    real_plan = batched_prefill.plan_prefix_sharing

    def overlong_plan(prompts):
        plan = real_plan(prompts)
        return plan and [(length + 2 if len(members) > 1 else length, members) for length, members in plan]

    monkeypatch.setattr(batched_prefill, "plan_prefix_sharing", overlong_plan)
    requests = shared_prefix_requests(target)
    results = BatchedARExecutor(target).run(requests)
    assert [r.token_ids for r in results] != reference(target, requests)
