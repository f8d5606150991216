"""Accuracy against generated tokens per problem: the self-consistency curve, the greedy chain of
thought and each tree configuration as points (matplotlib's Agg canvas, no pyplot)."""

from __future__ import annotations

from pathlib import Path

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure


def plot_accuracy_vs_tokens(greedy: tuple[float, float] | None, curve: list[tuple[int, float, float]],
                            trees: list[tuple[str, float, float]], path: str | Path, title: str,
                            reranked: list[tuple[int, float, float]] = ()) -> Path:
    """greedy: (tokens, accuracy); curve and reranked: (K, tokens, accuracy) per K (self-consistency,
    and best-of-K on the same chains); trees: (label, tokens, accuracy)."""
    figure = Figure(figsize=(7.5, 4.8))
    axes = figure.add_subplot()
    if reranked:
        axes.plot([t for _, t, _ in reranked], [100 * a for _, _, a in reranked], "x--", color="tab:orange",
                  label="best-of-K reranked by the evaluator (same chains)")
    if curve:
        axes.plot([t for _, t, _ in curve], [100 * a for _, _, a in curve], "o-", color="tab:blue",
                  label="self-consistency (K chains)")
        for k, tokens, accuracy in curve:
            axes.annotate(f"K={k}", (tokens, 100 * accuracy), textcoords="offset points", xytext=(4, -11), fontsize=8)
    if greedy is not None:
        axes.plot([greedy[0]], [100 * greedy[1]], "s", color="black", label="greedy chain of thought")
    markers = "^vD<>pP*"
    colors = ("tab:green", "tab:red", "tab:purple", "tab:brown", "tab:pink", "tab:olive", "tab:cyan")  # not the curves'
    for index, (label, tokens, accuracy) in enumerate(trees):
        axes.plot([tokens], [100 * accuracy], markers[index % len(markers)], markersize=8,
                  color=colors[index % len(colors)], label=label)
    axes.set_xscale("log")
    axes.set_xlabel("generated tokens per problem (log scale)")
    axes.set_ylabel("accuracy (%)")
    axes.set_title(title, fontsize=10)
    axes.grid(True, alpha=0.3)
    axes.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.14))
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    FigureCanvasAgg(figure)
    figure.savefig(path, dpi=110, bbox_inches="tight")
    return path
