"""Answer rules over K chains that use the State Evaluator's values, exact over every K-subset of a
problem's pool of chains (as self-consistency is in paired_stats.expected_vote_accuracy):
- best-of-K: the highest-valued chain answers (the best-of-n search's rule);
- value-weighted vote: each answer scores the sum of its chains' values, the highest answers.
A chain that does not answer (answer None: cut off, or shown wrong by the task) or has no value
can neither be chosen nor vote. Ties are broken uniformly at random (expected credit).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from itertools import combinations

Chain = tuple[str | None, float | None]  # (answer, value)


def _candidates(chains: Sequence[Chain]) -> list[tuple[str, float]]:
    return [(answer, value) for answer, value in chains if answer is not None and value is not None]


def best_chain_credit(chains: Sequence[Chain], correct: set[str]) -> float:
    """The expected correctness of answering with the highest-valued chain."""
    candidates = _candidates(chains)
    if not candidates:
        return 0.0
    top = max(value for _, value in candidates)
    best = [answer for answer, value in candidates if value == top]
    return sum(answer in correct for answer in best) / len(best)


def weighted_vote_credit(chains: Sequence[Chain], correct: set[str]) -> float:
    """The expected correctness of the answer whose chains' values sum highest."""
    totals: dict[str, float] = defaultdict(float)
    for answer, value in _candidates(chains):
        totals[answer] += value
    if not totals:
        return 0.0
    top = max(totals.values())
    best = [answer for answer, total in totals.items() if total == top]
    return sum(answer in correct for answer in best) / len(best)


def expected_credit(rule: Callable[[Sequence[Chain], set[str]], float], chains: Sequence[Chain],
                    correct: set[str], k: int) -> float:
    """The exact mean of `rule` over every k-subset of the pool `chains`."""
    if not 1 <= k <= len(chains):
        raise ValueError(f"k = {k} outside 1..{len(chains)} chains")
    subsets = list(combinations(chains, k))
    return sum(rule(subset, correct) for subset in subsets) / len(subsets)
