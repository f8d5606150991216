"""Best-of-K over chains valued by the State Evaluator, exact over every K-subset of a problem's pool
of chains (as self-consistency is in paired_stats.expected_vote_accuracy): the highest-valued chain
answers (the best-of-n search's rule). A chain that does not answer (answer None: cut off, or shown
wrong by the task) or has no value can neither be chosen nor vote. Ties are broken uniformly at
random (expected credit).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import combinations

Chain = tuple[str | None, float | None]  # (answer, value)


def answering_chains(chains: Sequence[Chain]) -> list[tuple[str, float]]:
    """The (answer, value) of every chain that answers and has a value: the ones a rule can choose."""
    return [(answer, value) for answer, value in chains if answer is not None and value is not None]


def best_chain_credit(chains: Sequence[Chain], correct: set[str]) -> float:
    """The expected correctness of answering with the highest-valued chain."""
    candidates = answering_chains(chains)
    if not candidates:
        return 0.0
    top = max(value for _, value in candidates)
    best = [answer for answer, value in candidates if value == top]
    return sum(answer in correct for answer in best) / len(best)


def expected_credit(rule: Callable[[Sequence[Chain], set[str]], float], chains: Sequence[Chain],
                    correct: set[str], k: int) -> float:
    """The exact mean of `rule` over every k-subset of the pool `chains`."""
    if not 1 <= k <= len(chains):
        raise ValueError(f"k = {k} outside 1..{len(chains)} chains")
    subsets = list(combinations(chains, k))
    return sum(rule(subset, correct) for subset in subsets) / len(subsets)
