"""Sampling helpers: the top-p filter keeps what its definition over a full sort keeps
(candidates first, full sort for wide rows; ties at the cut all kept), and `sample` draws from
the given distribution (chi-square), never a token of probability 0; each check is shown to
catch a broken variant."""

from collections import Counter

import pytest
import torch
from scipy.stats import chisquare

import seed_tot.decoding.sampling as sampling
from seed_tot.decoding.sampling import _cut, sample, top_p_filter


def full_sort_filter(probs, top_p):
    """The definition, one row at a time in plain Python: most likely first, take tokens until the
    mass of those taken reaches top_p; keep every token at least as likely as the last one taken."""
    rows = probs.reshape(-1, probs.shape[-1])
    out = torch.zeros_like(rows)
    for r, row in enumerate(rows):
        values = sorted(row.tolist(), reverse=True)
        mass, last = 0.0, values[0]
        for value in values:
            if mass >= top_p:
                break
            mass, last = mass + value, value
        kept = row.masked_fill(row < last, 0.0)
        out[r] = kept / kept.sum()
    return out.reshape(probs.shape)


def mixed_rows(vocab=5000):
    """(2, 3, V): peaked rows (small nucleus) and flat rows (nucleus of thousands of tokens)."""
    generator = torch.Generator().manual_seed(3)
    logits = torch.randn(2, 3, vocab, generator=generator)
    logits[0] *= 12.0
    return torch.softmax(logits, dim=-1)


def matches_full_sort(filter_fn, probs, top_p) -> bool:
    return torch.allclose(filter_fn(probs, top_p), full_sort_filter(probs, top_p), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("top_p", [0.5, 0.9, 0.95])
def test_top_p_filter_keeps_what_a_full_sort_keeps(monkeypatch, top_p):
    probs = mixed_rows()
    monkeypatch.setattr(sampling, "TOP_P_CANDIDATES", 64)  # flat rows need the full sort
    assert matches_full_sort(top_p_filter, probs, top_p)
    assert matches_full_sort(top_p_filter, probs[0, 0], top_p)  # a single row (1-D)


def test_check_catches_a_filter_that_trusts_the_candidates_alone():
    """Negative control: without the full sort for wide rows, flat rows lose part of their nucleus."""

    def candidates_only(probs, top_p):
        flat = probs.reshape(-1, probs.shape[-1])
        kept = flat.masked_fill(flat < _cut(flat.topk(64, dim=-1).values, top_p), 0.0)
        return (kept / kept.sum(-1, keepdim=True)).reshape(probs.shape)

    assert not matches_full_sort(candidates_only, mixed_rows(), 0.9)


def test_tokens_tied_at_the_cut_are_all_kept():
    probs = torch.tensor([0.5, 0.2, 0.1, 0.2, 0.0])  # 0.5 + 0.2 reaches 0.6; the other 0.2 ties
    assert top_p_filter(probs, 0.6).nonzero().flatten().tolist() == [0, 1, 3]


def chi_square_pvalue(sampler, probs, n=20_000) -> float:
    generator = torch.Generator().manual_seed(0)
    counts = Counter(sampler(probs, generator) for _ in range(n))
    support = [i for i in range(len(probs)) if probs[i] > 0]
    assert set(counts) <= set(support), "drew a token of probability 0"
    expected = [float(probs[i]) * n for i in support]
    return chisquare([counts.get(i, 0) for i in support], [e * n / sum(expected) for e in expected]).pvalue


PROBS = torch.tensor([0.0, 0.3, 0.05, 0.0, 0.4, 0.2, 0.05, 0.0])


def test_sample_draws_the_given_distribution_and_never_a_zero():
    assert chi_square_pvalue(sample, PROBS) > 1e-3


def test_check_catches_a_sampler_that_sharpens_the_distribution():
    def sharpened(probs, generator):
        return sample(probs**1.5 / (probs**1.5).sum(), generator)

    assert chi_square_pvalue(sharpened, PROBS) < 1e-6


def test_sample_never_passes_the_last_possible_token():
    generator = torch.Generator().manual_seed(1)
    probs = torch.tensor([0.5, 0.5, 0.0, 0.0])
    assert {sample(probs, generator) for _ in range(2000)} == {0, 1}
