"""Plots of SEED scheduler events: a schedule Gantt chart (like the paper's Fig. 3b) and the
target's utilization over time (like Fig. 7a).

Figures are drawn with matplotlib's Agg canvas directly (no pyplot, no global backend
switch), so plotting works headless and in worker threads.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from seed_tot.scheduling.events import (
    TARGET,
    Event,
    intervals,
    target_busy_fraction,
    utilization_timeline,
)

_COLORS = ["tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown", "tab:pink", "tab:olive"]


def _color(worker: int) -> str:
    return _COLORS[worker % len(_COLORS)]


def _save(figure: Figure, path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    FigureCanvasAgg(figure)
    figure.savefig(path, dpi=110, bbox_inches="tight")
    return path


def plot_schedule(events: Iterable[Event], path: str | Path, title: str = "SEED schedule") -> Path:
    """Gantt chart: one row per draft worker (drafting, then waiting in the verify queue) and
    one row for the target (each verification coloured by the worker whose draft it checks)."""
    events = list(events)
    if not events:
        raise ValueError("no scheduler events to plot")
    t0 = min(e.time for e in events)
    workers = sorted({e.worker for e in events if e.worker != TARGET})
    rows = {w: i for i, w in enumerate(workers)}
    target_row = len(workers)

    figure = Figure(figsize=(10, 1.0 + 0.55 * (len(workers) + 1)))
    ax = figure.add_subplot(1, 1, 1)
    for worker, _, start, end in intervals(events, "draft_start", "draft_end"):
        ax.broken_barh([(start - t0, end - start)], (rows[worker] - 0.35, 0.7), color=_color(worker))
    for worker, _, start, end in intervals(events, "enqueue", "verify_start"):
        ax.broken_barh([(start - t0, end - start)], (rows[worker] - 0.15, 0.3), color="lightgrey")
    for worker, _, start, end in intervals(events, "verify_start", "verify_end"):
        ax.broken_barh([(start - t0, end - start)], (target_row - 0.35, 0.7), color=_color(worker), alpha=0.8)
    for _, _, start, end in intervals(events, "prefill_start", "prefill_end"):
        ax.broken_barh([(start - t0, end - start)], (target_row - 0.35, 0.7), color="black")

    ax.set_yticks(list(range(len(workers) + 1)))
    ax.set_yticklabels([f"draft {w}" for w in workers] + ["target"])
    ax.set_xlabel("seconds")
    busy = target_busy_fraction(events)
    ax.set_title(title + (f" (target busy {busy:.0%})" if busy is not None else ""))
    legend = [Patch(color=_color(w), label=f"draft {w}") for w in workers]
    legend += [Patch(color="lightgrey", label="waiting in verify queue"), Patch(color="black", label="target prefill")]
    ax.legend(handles=legend, loc="upper center", bbox_to_anchor=(0.5, -0.25), ncol=min(len(legend), 5), fontsize=8)
    return _save(figure, path)


def plot_target_utilization(
    events: Iterable[Event], path: str | Path, bins: int = 50, title: str = "Target utilization"
) -> Path:
    """Busy fraction of the target model per time bin, with the run's overall fraction."""
    events = list(events)
    centres, busy = utilization_timeline(events, bins)
    if not centres:
        raise ValueError("not enough scheduler events to plot")
    figure = Figure(figsize=(8, 3))
    ax = figure.add_subplot(1, 1, 1)
    ax.step(centres, busy, where="mid", label="per bin")
    overall = target_busy_fraction(events)
    if overall is not None:
        ax.axhline(overall, color="tab:red", linestyle="--", label=f"overall {overall:.0%}")
    ax.set_ylim(0, 1.05)
    ax.set_xlabel("seconds")
    ax.set_ylabel("target busy")
    ax.set_title(title)
    ax.legend(fontsize=8)
    return _save(figure, path)
