"""`seed-tot bench`: several executors on the SAME problems, in the paper's Table 1 layout.

Rows are (method, k_config) pairs: sd with a chain k_config is SD, sd with a tree k_config is
MCSD, seed likewise SEED / MCSD+SEED; batched AR, batched speculative and the transformers
peers (generate(), assisted generation) are extra rows. Every row runs the same problems
with the same search settings and seeds, one after another in one process, so ratios are
measured side by side.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from seed_tot.errors import ConfigError
from seed_tot.machine_facts import machine_facts

# Bench rows beside the methods: transformers' assisted generation (hf-generate is a method).
PEERS = {"hf-assisted"}


@dataclass(frozen=True)
class Row:
    method: str
    k_config: tuple[int, ...] | None = None

    @property
    def label(self) -> str:
        if self.k_config is None:
            return {"ar": "AR", "batched": "batched AR", "hf-generate": "transformers generate()",
                    "hf-assisted": "transformers assisted"}.get(self.method, self.method)
        tree = any(k > 1 for k in self.k_config)
        names = {"sd": "MCSD" if tree else "SD", "seed": "MCSD+SEED" if tree else "SEED",
                 "batched-sd": "batched MCSD" if tree else "batched SD"}
        shape = ",".join(map(str, self.k_config))
        return f"{names.get(self.method, self.method)} ({shape})"


@dataclass
class Cell:
    task: str
    temperature: float
    row: str
    method: str
    k_config: list[int] | None
    problems: int
    new_tokens: int
    wall_seconds: float
    tokens_per_second: float
    acceptance_rate: float | None
    score: float
    target_busy_fraction: float | None = None
    speedup: float | None = None
    events: list[dict] = field(default_factory=list, repr=False)


def _needs_draft(name: str) -> bool:
    from seed_tot.scheduling.methods import METHODS

    return name in METHODS and METHODS[name].needs_draft


def plan_rows(methods: list[str], k_configs: list[tuple[int, ...]]) -> list[Row]:
    """One row per method, and one per draft shape for the methods with a draft model."""
    rows = []
    for method in methods:
        if _needs_draft(method):
            rows.extend(Row(method, k) for k in k_configs)
        else:
            rows.append(Row(method))
    return rows


def row_settings(rows: list[Row], pairs: list[tuple[str, object]]) -> dict[str, dict]:
    """(name, value) settings per method: each goes to every row whose method has that option."""
    from seed_tot.scheduling.methods import METHODS

    methods = [r.method for r in rows if r.method in METHODS]
    by_method: dict[str, dict] = {}
    for name, value in pairs:
        takers = [m for m in dict.fromkeys(methods) if name in METHODS[m].settings]
        if not takers:
            raise ConfigError(f"No bench method takes --method-option {name}: add a method that has it (e.g. bita for checkpoint).")
        for method in takers:
            by_method.setdefault(method, {})[name] = value
    return by_method


def build_executor(row: Row, target, draft, n_thoughts: int, settings: dict | None = None):
    from seed_tot.scheduling.factory import make_executor
    from seed_tot.scheduling.methods import METHOD_NAMES, METHODS
    from seed_tot.scheduling.peers import peer_executor

    if row.method in PEERS:
        return peer_executor(row.method, target, draft)
    if row.method not in METHODS:
        raise ConfigError(f"Unknown bench method {row.method!r}: use {', '.join([*METHOD_NAMES, *sorted(PEERS)])}.")
    method = METHODS[row.method]
    options: dict = dict(settings or {})
    if row.k_config is not None:
        options["k_config"] = row.k_config
    if method.draft_workers:
        options["num_workers"] = n_thoughts
    return make_executor(row.method, target, draft if method.needs_draft else None, **options)


def _busy_fraction(batches) -> float | None:
    from seed_tot.scheduling.events import Event, target_busy_fraction

    fractions = []
    for batch in batches:
        if batch.events:
            value = target_busy_fraction([Event(**e) for e in batch.events])
            if value is not None:
                fractions.append((value, batch.wall_seconds))
    total = sum(w for _, w in fractions)
    return sum(v * w for v, w in fractions) / total if total else None


def run_cell(task, problems, executor, tokenizer, search: str, search_config, row: Row, temperature: float) -> Cell:
    from seed_tot.api import solve

    tokens, seconds, proposed, accepted, score, batches = 0, 0.0, 0, 0, 0.0, []
    for problem in problems:
        result = solve(task, problem, executor, tokenizer, search=search, config=search_config)
        m = result.metrics
        tokens += m.new_tokens
        seconds += m.wall_seconds
        proposed += m.draft_tokens_proposed
        accepted += m.draft_tokens_accepted
        score += float(result.score or 0.0)
        batches.extend(result.batches)
    events = next((b.events for b in reversed(batches) if b.events and b.role == "thought"), None) or []
    return Cell(
        task=task.name,
        temperature=temperature,
        row=row.label,
        method=row.method,
        k_config=list(row.k_config) if row.k_config else None,
        problems=len(problems),
        new_tokens=tokens,
        wall_seconds=seconds,
        tokens_per_second=tokens / seconds if seconds else 0.0,
        acceptance_rate=accepted / proposed if proposed else None,
        score=score / max(1, len(problems)),
        target_busy_fraction=_busy_fraction(batches),
        events=events,
    )


def add_speedups(cells: list[Cell], baseline: str = "AR") -> None:
    base = {(c.task, c.temperature): c.tokens_per_second for c in cells if c.row == baseline}
    for cell in cells:
        reference = base.get((cell.task, cell.temperature))
        cell.speedup = cell.tokens_per_second / reference if reference else None


def markdown_table(cells: list[Cell]) -> str:
    """Rows = methods; for each temperature and task: tokens/s and speedup over AR."""
    tasks = list(dict.fromkeys(c.task for c in cells))
    temps = list(dict.fromkeys(c.temperature for c in cells))
    rows = list(dict.fromkeys(c.row for c in cells))
    index = {(c.row, c.task, c.temperature): c for c in cells}
    header = ["method"] + [f"T={t} {task} tok/s" for t in temps for task in tasks] + [
        f"T={t} {task} speedup" for t in temps for task in tasks
    ]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in rows:
        values = [row]
        for metric in ("tokens_per_second", "speedup"):
            for t in temps:
                for task in tasks:
                    cell = index.get((row, task, t))
                    value = getattr(cell, metric) if cell else None
                    values.append("-" if value is None else (f"{value:.2f}x" if metric == "speedup" else f"{value:.2f}"))
        lines.append("| " + " | ".join(values) + " |")
    return "\n".join(lines)


def detail_table(cells: list[Cell]) -> str:
    lines = ["| task | T | method | problems | tokens | seconds | tok/s | speedup | acceptance | target busy | score |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for c in cells:
        acc = "-" if c.acceptance_rate is None else f"{c.acceptance_rate:.1%}"
        busy = "-" if c.target_busy_fraction is None else f"{c.target_busy_fraction:.0%}"
        speed = "-" if c.speedup is None else f"{c.speedup:.2f}x"
        lines.append(f"| {c.task} | {c.temperature} | {c.row} | {c.problems} | {c.new_tokens} | {c.wall_seconds:.1f} "
                     f"| {c.tokens_per_second:.2f} | {speed} | {acc} | {busy} | {c.score:.2f} |")
    return "\n".join(lines)


def write_outputs(cells: list[Cell], out: Path, settings: dict) -> list[Path]:
    from seed_tot.observe.bench_plots import plot_speedups
    from seed_tot.observe.plots import plot_schedule, plot_target_utilization
    from seed_tot.scheduling.events import Event

    out.mkdir(parents=True, exist_ok=True)
    settings = settings | {"machine": machine_facts()}
    report = f"# seed-tot bench\n\nsettings: `{json.dumps(settings)}`\n\n{markdown_table(cells)}\n\n{detail_table(cells)}\n"
    paths = [out / "bench.md", out / "bench.json"]
    paths[0].write_text(report)
    paths[1].write_text(json.dumps({"settings": settings, "cells": [asdict(c) for c in cells]}, indent=2))
    paths.append(plot_speedups(cells, out / "speedup.png"))
    seed_cells = [c for c in cells if c.events]
    if seed_cells:
        events = [Event(**e) for e in seed_cells[-1].events]
        paths.append(plot_schedule(events, out / "schedule.png", title=f"{seed_cells[-1].row} schedule"))
        paths.append(plot_target_utilization(events, out / "utilization.png"))
    return paths
