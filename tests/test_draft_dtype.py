"""The draft model's dtype: which one 'auto' picks, and that it never changes the output."""

import pytest
import torch

from seed_tot.config import DecodeConfig
from seed_tot.decoding.autoregressive import autoregressive_decode
from seed_tot.models import loading
from seed_tot.models.tiny import build_tiny_pair
from seed_tot.requests import GenerationRequest
from seed_tot.runtime import ModelRunner
from seed_tot.scheduling.factory import make_executor
from seed_tot.scheduling.seed.worker import TinyDraft

CPU = torch.device("cpu")


@pytest.mark.parametrize("packing", [True, False])
def test_auto_gives_a_float16_target_a_bfloat16_draft_where_packing_works(monkeypatch, packing):
    monkeypatch.setattr(loading, "packing_works", lambda dtype: packing)
    assert loading.resolve_draft_dtype("auto", torch.float16, CPU) == (torch.bfloat16 if packing else torch.float16)
    assert loading.resolve_draft_dtype("auto", torch.bfloat16, CPU) == torch.bfloat16
    assert loading.resolve_draft_dtype("auto", torch.float32, CPU) == torch.float32
    assert loading.resolve_draft_dtype("auto", torch.float16, torch.device("cuda")) == torch.float16
    assert loading.resolve_draft_dtype("float16", torch.float16, CPU) == torch.float16
    assert loading.resolve_draft_dtype("float32", torch.bfloat16, CPU) == torch.float32


def mixed_pair() -> tuple[ModelRunner, ModelRunner]:
    """The tiny float32 target with the tiny draft in bfloat16."""
    draft, _, tokenizer = build_tiny_pair(seed=0, dtype=torch.bfloat16)
    _, target, _ = build_tiny_pair(seed=0, dtype=torch.float32)
    return ModelRunner(draft, tokenizer, "tiny-draft-bf16"), ModelRunner(target, tokenizer, "tiny-target")


def greedy_requests(tokenizer) -> list[GenerationRequest]:
    texts = ["Hello world", "The quick brown fox jumps", "a", "Q: 3 apples and 4 pears. How many?"]
    return [GenerationRequest(tokenizer.encode(text), DecodeConfig(max_new_tokens=20 + 3 * i), seed=i,
                              request_id=f"r{i}") for i, text in enumerate(texts)]


@pytest.mark.parametrize("method", ["sd", "mcsd", "batched-sd", "batched-mcsd"])
def test_greedy_output_with_a_bfloat16_draft_equals_the_float32_targets_ar(method):
    draft, target = mixed_pair()
    assert (draft.dtype, target.dtype) == (torch.bfloat16, torch.float32)
    requests = greedy_requests(target.tokenizer)
    results = make_executor(method, target, draft).run(requests)
    expected = [autoregressive_decode(target, r.prompt_ids, r.config, r.seed).token_ids for r in requests]
    assert [r.token_ids for r in results] == expected
    assert sum(r.stats.draft_tokens_accepted for r in results) > 0  # the draft was used, not bypassed


def test_seed_workers_with_a_bfloat16_draft_equal_the_float32_targets_ar():
    _, target = mixed_pair()
    requests = greedy_requests(target.tokenizer)
    executor = make_executor("seed", target, TinyDraft(seed=0, dtype="bfloat16"), num_workers=2)
    try:
        results = executor.run(requests)
    finally:
        executor.close()
    expected = [autoregressive_decode(target, r.prompt_ids, r.config, r.seed).token_ids for r in requests]
    assert [r.token_ids for r in results] == expected
