"""scripts/bench_executors.py's charts: its speedup bars and the speedup against n."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from seed_tot.observe.bench_plots import save_figure


@dataclass(frozen=True)
class SpeedupBar:
    """One bar: `row` (a method) in the group of `task` at `temperature`."""

    task: str
    temperature: float
    row: str
    speedup: float | None


def plot_scaling(rows: list[dict], path: str | Path) -> Path:
    """Speedup over serial AR against n, one line per method (rows: n, method, speedup_vs_ar)."""
    figure = Figure(figsize=(6, 4))
    FigureCanvasAgg(figure)
    axes = figure.add_subplot(1, 1, 1)
    for method in dict.fromkeys(r["method"] for r in rows):
        points = sorted((r["n"], r["speedup_vs_ar"]) for r in rows if r["method"] == method and r["speedup_vs_ar"])
        if points:
            axes.plot([n for n, _ in points], [s for _, s in points], marker="o", label=method)
    axes.axhline(1.0, color="black", linewidth=0.8)
    axes.set_xlabel("n (requests per expansion)")
    axes.set_ylabel("speedup over serial AR (tokens/s)")
    axes.legend(fontsize=8)
    return save_figure(figure, path)
