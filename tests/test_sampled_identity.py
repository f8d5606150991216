"""Deterministic drafts (one-hot q: n-gram lookup) are verified by drawing ONE token from the
target and following the matching child (seed_tot/decoding/verify.py). That draws exactly
what autoregressive sampling draws, so a sampled lookup output is token-identical to AR
sampling with the same seed, whatever was drafted: draft lengths may then follow the batch
width (draft_slot_budget) without changing any output. Checked on an 8-token vocabulary, where
lookup drafts are often accepted, with a negative control that draws once more on a mismatch."""

import pytest
import torch

import seed_tot.scheduling.batched.speculative as batched_speculative
from seed_tot.config import DecodeConfig
from seed_tot.decoding.autoregressive import autoregressive_decode
from seed_tot.decoding.drafters import PromptLookupDrafter
from seed_tot.decoding.sampling import sample
from seed_tot.decoding.speculative import speculative_decode_with
from seed_tot.decoding.verify import DraftTree, Verdict
from seed_tot.errors import ConfigError
from seed_tot.requests import GenerationRequest
from seed_tot.scheduling.batched import BatchedSpeculativeExecutor

PROMPTS = [[1, 5, 2, 1, 5, 7, 1], [3, 3, 4, 3, 3], [2, 6, 2, 6, 2], [7, 1, 7, 1, 0, 7]]
CONFIG = DecodeConfig(max_new_tokens=16, temperature=1.0, top_p=0.9)


@pytest.fixture(scope="module")
def target8(small_vocab_pair):
    return small_vocab_pair(seed=3)[1]


def requests(count: int) -> list[GenerationRequest]:
    return [GenerationRequest(PROMPTS[i % len(PROMPTS)], CONFIG, seed=100 + i, request_id=str(i)) for i in range(count)]


def ar_tokens(target, reqs) -> list[list[int]]:
    return [autoregressive_decode(target, r.prompt_ids, r.config, r.seed).token_ids for r in reqs]


def lookup_executor(target, **options) -> BatchedSpeculativeExecutor:
    return BatchedSpeculativeExecutor(target, None, (1, 1, 1), drafter="lookup", prefix_cache_mb=0, **options)


def test_sampled_batched_lookup_equals_autoregressive_sampling(target8):
    reqs = requests(6)
    results = lookup_executor(target8).run(reqs)
    assert sum(r.stats.draft_tokens_accepted for r in results) > 10  # drafts did replace target steps
    assert [r.token_ids for r in results] == ar_tokens(target8, reqs)


def test_sampled_serial_lookup_equals_autoregressive_sampling(target8):
    accepted = 0
    for r in requests(4):
        drafter = PromptLookupDrafter(8, num_tokens=3)
        out = speculative_decode_with(drafter, target8, r.prompt_ids, r.config, seed=r.seed)
        accepted += out.stats.draft_tokens_accepted
        assert out.token_ids == autoregressive_decode(target8, r.prompt_ids, r.config, r.seed).token_ids
    assert accepted > 0


def test_draft_slot_budget_shares_drafts_out_and_changes_no_output(target8):
    reqs = requests(12)
    unbounded = lookup_executor(target8).run(reqs)
    budgeted = lookup_executor(target8, draft_slot_budget=8).run(reqs)  # 12 rows: no drafts until 4 remain
    alone = [lookup_executor(target8, draft_slot_budget=8).run([r])[0] for r in reqs[:3]]
    assert [r.token_ids for r in budgeted] == [r.token_ids for r in unbounded]
    assert [r.token_ids for r in alone] == [r.token_ids for r in unbounded[:3]]
    assert sum(r.stats.draft_tokens_proposed for r in budgeted) < sum(r.stats.draft_tokens_proposed for r in unbounded)
    assert sum(r.stats.target_forwards for r in alone) < sum(r.stats.target_forwards for r in budgeted[:3])


def test_draft_slot_budget_needs_the_lookup_drafter(target8):
    with pytest.raises(ConfigError, match="draft_slot_budget"):
        BatchedSpeculativeExecutor(target8, target8, (1, 1), draft_slot_budget=4)


def match_then_redraw(tree: DraftTree, target_probs: torch.Tensor, generator: torch.Generator) -> Verdict:
    """WRONG on purpose: like the match rule, but a mismatch emits a second, fresh draw from p
    (the right emission is the first draw; a second draw makes the proposed token too likely)."""
    node, path, p = -1, [], target_probs[0]
    while True:
        drawn = sample(p, generator)
        child = next((c for c in tree.children(node) if tree.tokens[c] == drawn), None)
        if child is None:
            return Verdict(path, [tree.tokens[i] for i in path], sample(p, generator) if tree.children(node) else drawn)
        path.append(child)
        node, p = child, target_probs[1 + child]


def test_identity_check_catches_a_wrong_match_rule(target8, monkeypatch):
    monkeypatch.setattr(batched_speculative, "verify_tree", match_then_redraw)
    reqs = requests(6)
    assert [r.token_ids for r in lookup_executor(target8).run(reqs)] != ar_tokens(target8, reqs)


# Lookahead and Jacobi decoding sample with the same one-hot rule (verify_guesses).

def inner_decoders():
    import seed_tot.decoding.jacobi as jacobi
    import seed_tot.decoding.lookahead as lookahead

    return {
        "lookahead": (lookahead, lambda t, r: lookahead.lookahead_decode(t, r.prompt_ids, r.config, r.seed, window=3,
                                                                          ngram=3, candidates=3)),
        "jacobi": (jacobi, lambda t, r: jacobi.jacobi_decode(t, r.prompt_ids, r.config, r.seed, block_size=4)),
    }


@pytest.mark.parametrize("name", ["lookahead", "jacobi"])
def test_sampled_inner_decoders_equal_autoregressive_sampling(target8, name):
    _, decode = inner_decoders()[name]
    reqs = requests(6)
    outs = [decode(target8, r) for r in reqs]
    assert sum(o.stats.draft_tokens_accepted for o in outs) > 5  # guesses did replace target steps
    assert [o.token_ids for o in outs] == ar_tokens(target8, reqs)


@pytest.mark.parametrize("name", ["lookahead", "jacobi"])
def test_inner_decoder_identity_check_catches_a_wrong_match_rule(target8, monkeypatch, name):
    import seed_tot.decoding.verify as verify

    module, decode = inner_decoders()[name]
    monkeypatch.setattr(verify, "verify_tree", match_then_redraw)  # what verify_guesses calls when sampling
    reqs = requests(6)
    assert [decode(target8, r).token_ids for r in reqs] != ar_tokens(target8, reqs)
