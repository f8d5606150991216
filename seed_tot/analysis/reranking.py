"""The reranking report over a pool of valued chains: best-of-K and the value-weighted vote (each
answer scores the sum of its chains' values, the highest answers) against self-consistency at each
K, exact over every K-subset of a problem's chains, with paired bootstraps and the values' AUROC.
Ties are broken uniformly at random (expected credit)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from seed_tot.observe.paired_stats import auroc, expected_vote_accuracy, paired_bootstrap
from seed_tot.observe.rerank import Chain, answering_chains, best_chain_credit, expected_credit


def weighted_vote_credit(chains: Sequence[Chain], correct: set[str], power: float = 1.0) -> float:
    """The expected correctness of the answer whose chains' values (each to `power`: 0 is the plain
    vote of the valued chains, large powers near best-of-K) sum highest."""
    totals: dict[str, float] = defaultdict(float)
    for answer, value in answering_chains(chains):
        totals[answer] += value ** power
    if not totals:
        return 0.0
    top = max(totals.values())
    best = [answer for answer, total in totals.items() if total == top]
    return sum(answer in correct for answer in best) / len(best)


def rerank_table(rated: dict, judge: str, ks: tuple[int, ...], resamples: int = 10_000) -> list[str]:
    """A markdown report of the three rules at each K, from {problem id: ([(answer, value)] per chain,
    correct answers, judge prompt tokens per chain)}: each rule's exact expected accuracy, its paired
    bootstrap against the vote, and the judge's AUROC on the chains (pooled and within a problem)."""
    ids = sorted(rated, key=lambda pid: (len(pid), pid))
    size = min(len(rated[pid][0]) for pid in ids)
    chains = [(answer, value, answer in rated[pid][1]) for pid in ids for answer, value in rated[pid][0][:size]]
    scored = [(value, ok) for answer, value, ok in chains if answer is not None and value is not None]
    chain_auroc = auroc([v for v, _ in scored], [ok for _, ok in scored])
    # reranking only compares chains of one problem: the AUROC within each problem that has both
    within = [auroc([v for a, v in pool if a is not None and v is not None],
                    [a in correct for a, v in pool if a is not None and v is not None])
              for pool, correct in ((rated[pid][0][:size], rated[pid][1]) for pid in ids)]
    within = [x for x in within if x is not None]
    prompt = sum(sum(rated[pid][2][:size]) for pid in ids) / len(ids) / size
    lines = [f"{len(ids)} problems ({ids[0]} ... {ids[-1]}), {size} sampled chains each; {judge}'s AUROC on the {len(scored)} answering chains (value against correct): "
             + ("n/a" if chain_auroc is None else f"{chain_auroc:.3f}")
             + "; within a problem (mean over the " + f"{len(within)} problems with right and wrong chains): "
             + ("n/a" if not within else f"{sum(within) / len(within):.3f}")
             + f"; {prompt:,.0f} evaluator prompt tokens per chain.", "",
             "| K | self-consistency | best-of-K | best-of-K - vote (95% paired bootstrap) "
             "| value-weighted vote | weighted - vote (95%) |", "|---|---|---|---|---|---|"]
    for k in (k for k in ks if k <= size):
        vote, best, weighted = [], [], []
        for pid in ids:
            pool, correct = rated[pid][0][:size], rated[pid][1]
            vote.append(expected_vote_accuracy([a for a, _ in pool], correct, k))
            best.append(expected_credit(best_chain_credit, pool, correct, k))
            weighted.append(expected_credit(weighted_vote_credit, pool, correct, k))
        cells = [str(k), f"{sum(vote):.2f}/{len(ids)}"]
        for rule in (best, weighted):
            low, high = paired_bootstrap([r - v for r, v in zip(rule, vote)], resamples=resamples)
            cells += [f"{sum(rule):.2f}/{len(ids)}", f"{(sum(rule) - sum(vote)) / len(ids):+.1%} "
                      f"[{low:+.1%}, {high:+.1%}]"]
        lines.append("| " + " | ".join(cells) + " |")
    return lines
