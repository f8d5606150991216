"""How good a State Evaluator would have to be for reranking chains to beat the vote over them.

Best-of-K reranking answers with the chain of K that the evaluator rates highest; self-consistency
answers with the majority of the same K chains. Both cost the same generated tokens (a logit
evaluator generates none), so which one wins depends only on how well the evaluator tells correct
chains from wrong ones. Here the evaluator is modelled by its AUROC alone: the equal-variance
binormal model, a correct chain's value ~ N(d, 1) and a wrong chain's ~ N(0, 1), whose AUROC is
Phi(d / sqrt 2). Simulated over K-subsets of each problem's recorded pool of chains (the chains'
answers and correctness are the real ones), this gives best-of-K accuracy as a function of AUROC and
the AUROC at which it reaches self-consistency's accuracy (the break-even).
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist

# A chain's label: True = its answer is correct, False = wrong, None = it does not answer (cut off
# or rejected); a chain that does not answer can neither vote nor be chosen.
Label = bool | None
HIGHEST_AUROC = 0.9999


def separation_for_auroc(auroc: float) -> float:
    """d of the equal-variance binormal model whose AUROC is `auroc` (0 < auroc < 1)."""
    if not 0.0 < auroc < 1.0:
        raise ValueError(f"AUROC must lie strictly between 0 and 1, got {auroc}")
    return math.sqrt(2.0) * NormalDist().inv_cdf(auroc)


@dataclass(frozen=True)
class Draw:
    """One K-subset of a problem's chains, with each chain's evaluator noise."""

    labels: tuple[Label, ...]
    noise: tuple[float, ...]


def draw_subsets(labels: Sequence[Label], k: int, count: int, rng: random.Random) -> list[Draw]:
    """`count` uniform K-subsets of one problem's chains, each chain with standard normal noise.
    The same draws serve every AUROC (common random numbers), so accuracy rises smoothly with it."""
    if not 1 <= k <= len(labels):
        raise ValueError(f"k = {k} outside 1..{len(labels)} chains")
    draws = []
    for _ in range(count):
        subset = tuple(labels[i] for i in rng.sample(range(len(labels)), k))
        draws.append(Draw(subset, tuple(rng.gauss(0.0, 1.0) for _ in subset)))
    return draws


def rerank_correct(draw: Draw, separation: float) -> bool:
    """Whether the highest-valued answering chain of the draw is correct (no answering chain: wrong)."""
    scored = [(separation * label + noise, label) for label, noise in zip(draw.labels, draw.noise) if label is not None]
    return bool(scored) and max(scored)[1]


def rerank_accuracy(problems: Sequence[Sequence[Draw]], auroc: float) -> float:
    """Best-of-K accuracy over problems, each problem's credit the mean over its draws."""
    separation = separation_for_auroc(auroc)
    credits = [sum(rerank_correct(d, separation) for d in draws) / len(draws) for draws in problems]
    return sum(credits) / len(credits)


def break_even_auroc(problems: Sequence[Sequence[Draw]], target: float, tolerance: float = 0.001) -> float | None:
    """The smallest AUROC at which best-of-K accuracy reaches `target` (bisection over the same
    draws); 0.5 when a coin already reaches it, None when even a near-perfect evaluator does not."""
    if rerank_accuracy(problems, 0.5) >= target:
        return 0.5
    if rerank_accuracy(problems, HIGHEST_AUROC) < target:
        return None
    low, high = 0.5, HIGHEST_AUROC
    while high - low > tolerance:
        middle = (low + high) / 2
        if rerank_accuracy(problems, middle) >= target:
            high = middle
        else:
            low = middle
    return high


def oracle_accuracy(labels: Sequence[Label], k: int) -> float:
    """The exact chance that K chains drawn from the pool hold a correct one (a perfect reranker)."""
    correct = sum(label is True for label in labels)
    return 1.0 - math.comb(len(labels) - correct, k) / math.comb(len(labels), k)
