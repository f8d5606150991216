"""Negative controls for the greedy lossless claims: each equality check used in the greedy tests
must fail when the rule it protects is broken. Every control injects one wrong rule into the
real decoder or executor and runs the same comparison with autoregressive decoding.

(The sampling claims have their own controls: test_distribution.py, test_seed_distribution.py,
test_lookahead.py.)
"""

import pytest

import seed_tot.decoding.drafters as drafters
import seed_tot.decoding.jacobi as jacobi
import seed_tot.decoding.lookahead as lookahead
import seed_tot.decoding.speculative as speculative
import seed_tot.scheduling.batched.speculative as batched_speculative
from seed_tot.decoding.verify import Verdict
from seed_tot.scheduling.batched import BatchedSpeculativeExecutor
from test_batched import reference, requests_for
from test_distribution import always_accept
from test_jacobi import check_equal_to_reference, prompt_cases


def follow_first_branch(tokens, parents, logits, temperature, top_p, generator) -> Verdict:
    """WRONG: accept the guesses' first branch (every Jacobi guess, the trie's first n-gram)
    without checking it against the target's outputs."""
    path, node = [], -1
    while (child := next((j for j, p in enumerate(parents) if p == node), None)) is not None:
        path.append(child)
        node = child
    return Verdict(path, [tokens[i] for i in path], int(logits[1 + node].argmax()))


def test_serial_speculative_check_catches_always_accept(tiny_pair, monkeypatch):
    draft, target = tiny_pair
    monkeypatch.setattr(speculative, "verify_tree", always_accept)
    decode = lambda t, prompt, config, seed: drafters.speculative_decode(draft, t, prompt, config, (2, 2, 1), seed=seed)
    with pytest.raises(AssertionError):
        check_equal_to_reference(decode, target, prompt_cases(20, seed=5))


@pytest.mark.parametrize("drafter", ["model", "lookup"])
def test_batched_speculative_check_catches_always_accept(tiny_pair, monkeypatch, drafter):
    draft, target = tiny_pair
    requests = requests_for(target.tokenizer)
    expected = reference(target, requests)
    monkeypatch.setattr(batched_speculative, "verify_tree", always_accept)
    if drafter == "model":
        executor = BatchedSpeculativeExecutor(target, draft, (2, 2, 1))
    else:
        executor = BatchedSpeculativeExecutor(target, None, (1, 1, 1, 1), drafter="lookup")
    assert [r.token_ids for r in executor.run(requests)] != expected


def test_jacobi_check_catches_accepting_unmatched_guesses(tiny_pair, monkeypatch):
    monkeypatch.setattr(jacobi, "verify_guesses", follow_first_branch)
    with pytest.raises(AssertionError):
        check_equal_to_reference(jacobi.jacobi_decode, tiny_pair[1], prompt_cases(20, seed=11), block_size=4)


def test_lookahead_check_catches_unverified_ngrams(tiny_pair, monkeypatch):
    monkeypatch.setattr(lookahead, "verify_guesses", follow_first_branch)
    with pytest.raises(AssertionError):
        check_equal_to_reference(
            lookahead.lookahead_decode, tiny_pair[1], prompt_cases(20, seed=3), window=4, ngram=3, candidates=4
        )
