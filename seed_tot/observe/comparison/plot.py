"""The comparison's points as a PNG: accuracy against generated tokens per problem."""

from __future__ import annotations

from pathlib import Path

from seed_tot.observe.comparison.points import BEST_OF_K, GREEDY, RUN, SELF_CONSISTENCY, Point


def draw(points: list[Point], path: Path, folders) -> Path:
    """The greedy chain of thought as a point, self-consistency and best-of-K as curves over K, each
    run as a point of its own; the title names the folders and the paired problems."""
    from seed_tot.observe.accuracy_plot import plot_accuracy_vs_tokens

    greedy = next(((p.tokens, p.accuracy) for p in points if p.kind == GREEDY), None)
    curve = [(p.k, p.tokens, p.accuracy) for p in points if p.kind == SELF_CONSISTENCY]
    reranked = [(p.k, p.tokens, p.accuracy) for p in points if p.kind == BEST_OF_K]
    trees = [(p.name, p.tokens, p.accuracy) for p in points if p.kind == RUN]
    n = len(points[0].per_problem)
    title = f"{', '.join(Path(f).name for f in folders)}: {n} problems"
    return plot_accuracy_vs_tokens(greedy, curve, trees, path, title, reranked)
