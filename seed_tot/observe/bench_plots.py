"""Benchmark charts: speedup bars, one group per task and temperature (`seed-tot bench`)."""

from __future__ import annotations

from pathlib import Path

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure


def plot_speedups(cells, path: str | Path) -> Path:
    """Bars of `cells` (anything with task, temperature, row and speedup)."""
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
    return save_figure(figure, path)


def _distinct_colors(count: int) -> list:
    """One color per bar series; matplotlib's default cycle repeats after 10."""
    from matplotlib import colormaps

    palette = colormaps["tab10" if count <= 10 else "tab20"]
    return [palette(i % palette.N) for i in range(count)]


def save_figure(figure: Figure, path: str | Path) -> Path:
    """Write `figure` as a PNG at `path` (its folder made), and return the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110, bbox_inches="tight")
    return path
