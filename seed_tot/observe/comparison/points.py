"""The comparison's points: each answer rule's correctness per paired problem and its generated
tokens per problem (greedy chain of thought, self-consistency at K chains, best-of-K reranked by
stored values, each tree run), the K whose tokens match a run, and what a paired interval supports."""

from __future__ import annotations

from dataclasses import dataclass
from math import comb

from seed_tot.observe.comparison.folders import TreeRun
from seed_tot.observe.comparison.pools import Chains
from seed_tot.observe.paired_stats import expected_vote_accuracy
from seed_tot.observe.rerank import best_chain_credit, expected_credit

SELF_CONSISTENCY_K = (1, 2, 4, 8, 16)
BOOTSTRAP_RESAMPLES = 10_000  # resamples of problems of every paired bootstrap (seed 0)
GREEDY, SELF_CONSISTENCY, BEST_OF_K, RUN = "greedy", "self-consistency", "best-of-K", "run"  # Point.kind


@dataclass
class Point:
    label: str
    per_problem: list[float]  # correctness (0/1, or an expectation) per paired problem
    tokens: float
    kind: str = RUN  # GREEDY, SELF_CONSISTENCY, BEST_OF_K or RUN (a tree run's answer, or its own chains')
    k: int | None = None  # chains per problem (self-consistency and best-of-K)
    name: str = ""  # a run's point in the plot's legend

    @property
    def accuracy(self) -> float:
        return sum(self.per_problem) / len(self.per_problem)


def self_consistency_points(chains: list[Chains]) -> list[tuple[int, Point]]:
    pool = min(len(c.answers) for c in chains)
    points = []
    for k in (k for k in SELF_CONSISTENCY_K if k <= pool):
        how = "all" if k == pool else f"exact mean over all {comb(pool, k)} {k}-subsets"
        per = [expected_vote_accuracy(c.answers[:pool], c.correct, k) for c in chains]
        tokens = sum(k * sum(c.tokens[:pool]) / pool for c in chains) / len(chains)
        points.append((k, Point(f"self-consistency K={k} ({how} of {pool} sampled chains)", per, tokens,
                                SELF_CONSISTENCY, k)))
    return points


def rerank_points(chains: list[Chains], sc: list[tuple[int, Point]]) -> list[tuple[int, Point]]:
    """Best-of-K reranked by the stored evaluator values, on the chains and tokens of self-consistency K."""
    pool = min(len(c.answers) for c in chains)
    points = []
    for k, vote in sc:
        per = [expected_credit(best_chain_credit, list(zip(c.answers[:pool], c.values[:pool])), c.correct, k)
               for c in chains]
        points.append((k, Point(f"best-of-K K={k} reranked by the logit evaluator (the same chains)", per,
                                vote.tokens, BEST_OF_K, k)))
    return points


def run_point(tree: TreeRun, what: str, per_problem: list[float], tokens: float) -> Point:
    return Point(f"run {tree.label}: {what}", per_problem, tokens, RUN, name=f"{tree.label}: {what}")


def comparison_points(trees: list[TreeRun], chains: dict, ids: list[str]):
    pool = [chains[pid][1] for pid in ids]
    greedy = None
    if all(c.greedy_correct is not None for c in pool):
        greedy = Point("greedy chain of thought", [float(c.greedy_correct) for c in pool],
                       sum(c.greedy_tokens for c in pool) / len(pool), GREEDY)
    sc = self_consistency_points(pool) if all(c.answers for c in pool) else []
    rerank = rerank_points(pool, sc) if sc and all(c.values is not None for c in pool) else []
    tree_points = []
    for tree in trees:
        reports = [tree.reports[pid] for pid in ids]
        tokens = sum(r.tree_tokens + r.sample_tokens for r in reports) / len(reports)
        tree_points.append(run_point(tree, "final", [float(r.correct["final"]) for r in reports], tokens))
        tree_points.append(run_point(tree, "final, one vote per path", [float(r.path_vote_correct) for r in reports],
                                     tokens))
    return greedy, sc, rerank, tree_points


OWN_CHAINS = "its chains' vote alone (greedy + sampled chains, no tree)"


def own_chains_points(trees: list[TreeRun], ids: list[str]) -> list[tuple[Point, Point]]:
    """(final, its own chains' vote) for each run with a tree: what the tree adds to the chains it ran.
    The chains' point is labelled with its run, as the table and the plot show it."""
    pairs = []
    for tree in (t for t in trees if t.has_tree):
        reports = [tree.reports[pid] for pid in ids]
        final = run_point(tree, "final", [float(r.correct["final"]) for r in reports],
                          sum(r.tree_tokens + r.sample_tokens for r in reports) / len(reports))
        chains = run_point(tree, OWN_CHAINS, [float(r.correct["cot_vote"]) for r in reports],
                           sum(r.chain_tokens for r in reports) / len(reports))
        pairs.append((final, chains))
    return pairs


def matched_k(sc: list[tuple[int, Point]], tokens: float) -> tuple[int, Point]:
    """The smallest K whose chains cost at least `tokens`, else the largest K there is."""
    return next(((k, p) for k, p in sc if p.tokens >= tokens), sc[-1])


def verdict(low: float, high: float, first: str = "the run") -> str:
    """What a 95% interval of (first - second) supports."""
    if low > 0:
        return f"{first} is better"
    if high < 0:
        return f"{first} is worse"
    return "no difference the data supports"
