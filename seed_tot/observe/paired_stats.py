"""Statistics for comparing answer rules on the same problems: the exact self-consistency
accuracy of K chains drawn from a larger pool, McNemar's exact test, a paired bootstrap and the AUROC
of values against labels."""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Sequence
from itertools import combinations


def majority_credit(answers: Sequence[str | None], correct: set[str]) -> float:
    """The expected correctness of a majority vote over `answers` (None: a chain that does not
    vote); a tie is broken uniformly at random, and no vote at all answers nothing (0)."""
    votes = Counter(answer for answer in answers if answer is not None)
    if not votes:
        return 0.0
    top = max(votes.values())
    tied = [answer for answer, count in votes.items() if count == top]
    return sum(answer in correct for answer in tied) / len(tied)


def expected_vote_accuracy(answers: Sequence[str | None], correct: set[str], k: int) -> float:
    """The exact mean of majority_credit over every k-subset of the pool `answers`."""
    if not 1 <= k <= len(answers):
        raise ValueError(f"k = {k} outside 1..{len(answers)} chains")
    subsets = list(combinations(answers, k))
    return sum(majority_credit(subset, correct) for subset in subsets) / len(subsets)


def mcnemar_exact(first: Sequence[bool], second: Sequence[bool]) -> tuple[int, int, float]:
    """(problems only `first` gets right, problems only `second` gets right, two-sided exact p)."""
    only_first = sum(a and not b for a, b in zip(first, second, strict=True))
    only_second = sum(b and not a for a, b in zip(first, second, strict=True))
    n = only_first + only_second
    if n == 0:
        return 0, 0, 1.0
    tail = sum(math.comb(n, i) for i in range(min(only_first, only_second) + 1)) / 2**n
    return only_first, only_second, min(1.0, 2 * tail)


def paired_bootstrap(differences: Sequence[float], resamples: int = 10_000, seed: int = 0,
                     level: float = 0.95) -> tuple[float, float]:
    """Percentile interval of the mean per-problem difference, resampling problems (fixed seed)."""
    if not differences:
        raise ValueError("no problems to resample")
    draw = random.Random(seed)
    n = len(differences)
    means = sorted(sum(differences[draw.randrange(n)] for _ in range(n)) / n for _ in range(resamples))
    low = means[int((1 - level) / 2 * resamples)]
    high = means[min(resamples - 1, int((1 + level) / 2 * resamples))]
    return low, high


def auroc(values: list[float], labels: list[bool]) -> float | None:
    """Mann-Whitney AUROC with ties counted half; None when one class is empty."""
    positives = sum(labels)
    negatives = len(labels) - positives
    if positives == 0 or negatives == 0:
        return None
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    start = 0
    while start < len(order):
        end = start
        while end + 1 < len(order) and values[order[end + 1]] == values[order[start]]:
            end += 1
        for k in range(start, end + 1):
            ranks[order[k]] = (start + end) / 2 + 1  # average rank of a tie group, from 1
        start = end + 1
    positive_ranks = sum(rank for rank, label in zip(ranks, labels) if label)
    return (positive_ranks - positives * (positives + 1) / 2) / (positives * negatives)
