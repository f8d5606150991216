"""Benchmark charts: speedup bars (one group per task and temperature) and speedup against n."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure


@dataclass(frozen=True)
class SpeedupBar:
    """One bar: `row` (a method) in the group of `task` at `temperature`."""

    task: str
    temperature: float
    row: str
    speedup: float | None


def plot_speedups(cells, path: str | Path) -> Path:
    """Bars of `cells` (anything with task, temperature, row and speedup, e.g. SpeedupBar)."""
    groups = list(dict.fromkeys((c.task, c.temperature) for c in cells))
    rows = list(dict.fromkeys(c.row for c in cells))
    index = {(c.row, c.task, c.temperature): c.speedup or 0.0 for c in cells}
    figure = Figure(figsize=(max(6, 1.6 * len(groups) * max(1, len(rows)) / 3), 4))
    FigureCanvasAgg(figure)
    axes = figure.add_subplot(1, 1, 1)
    width = 0.8 / max(1, len(rows))
    colors = _distinct_colors(len(rows))
    for i, row in enumerate(rows):
        xs = [g + i * width for g in range(len(groups))]
        axes.bar(xs, [index.get((row, task, t), 0.0) for task, t in groups], width, label=row, color=colors[i])
    axes.axhline(1.0, color="black", linewidth=0.8)
    axes.set_xticks([g + 0.4 - width / 2 for g in range(len(groups))])
    axes.set_xticklabels([f"{task}\nT={t}" for task, t in groups])
    axes.set_ylabel("speedup over AR (tokens/s)")
    axes.legend(fontsize=7, ncol=2)
    return _save(figure, path)


def _distinct_colors(count: int) -> list:
    """One color per bar series; matplotlib's default cycle repeats after 10."""
    from matplotlib import colormaps

    palette = colormaps["tab10" if count <= 10 else "tab20"]
    return [palette(i % palette.N) for i in range(count)]


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
    return _save(figure, path)


def _save(figure: Figure, path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110, bbox_inches="tight")
    return path
