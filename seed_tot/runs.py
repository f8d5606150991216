"""Runs that lose nothing: problem selection, per-problem JSONL results, resume, summary."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

from seed_tot.errors import SeedTotError


@dataclass
class ProblemRecord:
    """One finished problem, as appended to results.jsonl."""

    problem_id: str
    method: str
    answer: str | None
    gold: str
    score: float
    correct: bool
    new_tokens: int
    wall_seconds: float
    tokens_per_second: float
    acceptance_rate: float | None
    target_forwards: int
    draft_forwards: int
    parse_failures: int
    trace_path: str
    extra: dict = field(default_factory=dict)  # task-specific scores, e.g. coherency


def select_problems(problems: list, start: int = 0, limit: int | None = None, ids: tuple[str, ...] = ()) -> list:
    """Problems by explicit ids (in the given order), else the slice [start, start + limit)."""
    if ids:
        by_id = {p.id: p for p in problems}
        missing = [i for i in ids if i not in by_id]
        if missing:
            raise SeedTotError(
                f"Unknown problem id(s) {', '.join(missing[:5])}: ids run from {problems[0].id} to {problems[-1].id}."
            )
        return [by_id[i] for i in ids]
    if start < 0 or start >= len(problems):
        raise SeedTotError(f"--start {start} is outside the data set of {len(problems)} problems.")
    end = len(problems) if limit is None else start + limit
    return problems[start:end]


def finished_ids(results_path: Path) -> set[str]:
    """Ids already recorded in a results file (a torn last line from a crash is ignored)."""
    if not results_path.is_file():
        return set()
    done = set()
    for line in results_path.read_text().splitlines():
        try:
            done.add(json.loads(line)["problem_id"])
        except (json.JSONDecodeError, KeyError, TypeError):
            continue
    return done


def append_record(results_path: Path, record: ProblemRecord) -> None:
    """Append one JSON line and flush it to disk before the next problem starts."""
    results_path.parent.mkdir(parents=True, exist_ok=True)
    with results_path.open("a") as handle:
        handle.write(json.dumps(asdict(record)) + "\n")
        handle.flush()
        os.fsync(handle.fileno())


def load_records(results_path: Path) -> list[ProblemRecord]:
    records = []
    if results_path.is_file():
        for line in results_path.read_text().splitlines():
            try:
                records.append(ProblemRecord(**json.loads(line)))
            except (json.JSONDecodeError, TypeError):
                continue
    return records


def summarize(records: list[ProblemRecord]) -> dict:
    """Task score, tokens/s over all problems, acceptance rate and wall time."""
    if not records:
        return {"problems": 0}
    tokens = sum(r.new_tokens for r in records)
    seconds = sum(r.wall_seconds for r in records)
    rates = [r.acceptance_rate for r in records if r.acceptance_rate is not None]
    return {
        "problems": len(records),
        "score": sum(r.score for r in records) / len(records),
        "accuracy": sum(r.correct for r in records) / len(records),
        "new_tokens": tokens,
        "wall_seconds": seconds,
        "tokens_per_second": tokens / seconds if seconds else 0.0,
        "acceptance_rate": sum(rates) / len(rates) if rates else None,
        "parse_failures": sum(r.parse_failures for r in records),
    }


FAILED_FILE = "failed.jsonl"  # beside results.jsonl: problems a run could not finish (--resume retries them)


def append_failure(results_path: Path, problem_id: str, error: str, attempts: int, workers: list[str]) -> Path:
    """Record, fsynced, that a problem failed; it stays out of results.jsonl, so --resume tries it again."""
    path = results_path.parent / FAILED_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    entry = {"problem_id": problem_id, "error": error, "attempts": attempts, "workers": workers}
    with path.open("a") as handle:
        handle.write(json.dumps(entry) + "\n")
        handle.flush()
        os.fsync(handle.fileno())
    return path
