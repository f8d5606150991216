"""A vote that samples in rounds until it is sure (conditional, compute-adaptive voting), plain or
weighted by the learned judge, simulated on a stored pool of chains (scripts/vote_curve.py).

One problem's pool is its greedy chain's vote and its samples' votes (None: the chain casts no
vote) with each chain's new tokens, and for a judged vote each chain's value (None: no value, no
vote). A run of the adaptive vote draws the greedy chain and `first` samples, then `step` more at a
time while the winner's share of the votes (of the summed values, judged) is below `threshold` (or
nothing voted) and fewer than `cap` samples are drawn; it answers by the vote, ties going to the
greedy chain's answer when it is among them and split evenly otherwise, as `seed-tot --vote-weight
leaf` (plain) and the default judged vote do. Its expected credit and tokens are averaged over
random orders of the samples (the order they would be drawn in), seeded so the same pool gives the
same figures.
"""

from __future__ import annotations

import random
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Pool:
    """One problem's chains as the vote reads them."""

    greedy: str | None
    greedy_tokens: int
    samples: Sequence[str | None]
    sample_tokens: Sequence[int]
    correct: frozenset[str]
    greedy_value: float | None = None  # the judge's values: a judged vote weighs each chain by its own
    sample_values: Sequence[float | None] | None = None


def vote_credit(votes: Sequence[str], greedy: str | None, correct: frozenset[str]) -> float:
    """The plain vote's credit: 1 for a right winner, a tie split evenly unless the greedy chain's
    answer is in it (then the greedy's), 0 when nothing voted."""
    return tally_credit(dict(Counter(votes)), greedy, correct)


def tally(pool: Pool, drawn: Sequence[int], judged: bool) -> dict[str, float]:
    """Each answer's votes: one per answering chain, or (judged) the sum of its chains' values."""
    chains = [(pool.greedy, pool.greedy_value), *((pool.samples[i], (pool.sample_values or [None] * len(pool.samples))[i])
                                                   for i in drawn)]
    totals: dict[str, float] = defaultdict(float)
    for answer, value in chains:
        if answer is not None and (not judged or value is not None):
            totals[answer] += value if judged else 1.0
    return totals


def tally_credit(totals: dict[str, float], greedy: str | None, correct: frozenset[str]) -> float:
    """`vote_credit` of a tally (ties within 1e-9: summed values rarely tie exactly)."""
    if not totals:
        return 0.0
    top = max(totals.values())
    tied = [answer for answer, total in totals.items() if abs(total - top) < 1e-9]
    if greedy is not None and greedy in tied:
        return float(greedy in correct)
    return sum(answer in correct for answer in tied) / len(tied)


def tally_share(totals: dict[str, float]) -> float:
    whole = sum(totals.values())
    return max(totals.values()) / whole if totals and whole > 0 else 0.0


def one_order(pool: Pool, order: Sequence[int], first: int, step: int, cap: int, threshold: float,
              judged: bool = False) -> tuple[float, int, int]:
    """(credit, new tokens, samples drawn) of one run that draws the samples in `order`."""
    drawn = min(first, cap, len(order))
    while True:
        totals = tally(pool, order[:drawn], judged)
        if drawn >= min(cap, len(order)) or tally_share(totals) >= threshold:
            break
        drawn = min(drawn + step, cap, len(order))
    tokens = pool.greedy_tokens + sum(pool.sample_tokens[i] for i in order[:drawn])
    return tally_credit(totals, pool.greedy, pool.correct), tokens, drawn


def expected(pool: Pool, first: int, step: int, cap: int, threshold: float, orders: int = 200,
             seed: int = 0, judged: bool = False) -> tuple[float, float, float]:
    """(mean credit, mean new tokens, mean samples drawn) over `orders` random orders of the samples."""
    rng = random.Random(seed)
    indices = list(range(len(pool.samples)))
    credit = tokens = drawn = 0.0
    for _ in range(orders):
        rng.shuffle(indices)
        c, t, d = one_order(pool, indices, first, step, cap, threshold, judged)
        credit, tokens, drawn = credit + c, tokens + t, drawn + d
    return credit / orders, tokens / orders, drawn / orders
