"""A plain vote that samples in rounds until it is sure (conditional, compute-adaptive voting),
simulated on a stored pool of chains (scripts/vote_curve.py).

One problem's pool is its greedy chain's vote and its samples' votes (None: the chain casts no
vote) with each chain's new tokens. A run of the adaptive vote draws the greedy chain and `first`
samples, then `step` more at a time while the winner's share of the votes is below `threshold`
(or nothing voted) and fewer than `cap` samples are drawn; it answers by the plain vote, ties going
to the greedy chain's answer when it is among them and split evenly otherwise, as `seed-tot
--vote-weight leaf` votes. Its expected credit and tokens are averaged over random orders of the
samples (the order they would be drawn in), seeded so the same pool gives the same figures.
"""

from __future__ import annotations

import random
from collections import Counter
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


def vote_credit(votes: Sequence[str], greedy: str | None, correct: frozenset[str]) -> float:
    """The plain vote's credit: 1 for a right winner, a tie split evenly unless the greedy chain's
    answer is in it (then the greedy's), 0 when nothing voted."""
    counts = Counter(votes)
    if not counts:
        return 0.0
    top = max(counts.values())
    tied = [answer for answer, n in counts.items() if n == top]
    if greedy is not None and greedy in tied:
        return float(greedy in correct)
    return sum(answer in correct for answer in tied) / len(tied)


def winner_share(votes: Sequence[str]) -> float:
    counts = Counter(votes)
    return max(counts.values()) / len(votes) if votes else 0.0


def one_order(pool: Pool, order: Sequence[int], first: int, step: int, cap: int, threshold: float) -> tuple[float, int, int]:
    """(credit, new tokens, samples drawn) of one run that draws the samples in `order`."""
    drawn = min(first, cap, len(order))
    while True:
        votes = [a for a in [pool.greedy, *(pool.samples[i] for i in order[:drawn])] if a is not None]
        if drawn >= min(cap, len(order)) or winner_share(votes) >= threshold:
            break
        drawn = min(drawn + step, cap, len(order))
    tokens = pool.greedy_tokens + sum(pool.sample_tokens[i] for i in order[:drawn])
    return vote_credit(votes, pool.greedy, pool.correct), tokens, drawn


def expected(pool: Pool, first: int, step: int, cap: int, threshold: float, orders: int = 200,
             seed: int = 0) -> tuple[float, float, float]:
    """(mean credit, mean new tokens, mean samples drawn) over `orders` random orders of the samples."""
    rng = random.Random(seed)
    indices = list(range(len(pool.samples)))
    credit = tokens = drawn = 0.0
    for _ in range(orders):
        rng.shuffle(indices)
        c, t, d = one_order(pool, indices, first, step, cap, threshold)
        credit, tokens, drawn = credit + c, tokens + t, drawn + d
    return credit / orders, tokens / orders, drawn / orders
