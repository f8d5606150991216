"""Run metrics: every executor call of a search is timed and its request stats are summed.

tokens/s = new tokens / wall seconds spent inside executor calls (prompt formatting, parsing
and tree bookkeeping are not counted: they are the same for every executor).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Iterable

from seed_tot.requests import DecodeCounters, GenerationResult, GenerationStats


@dataclass
class BatchRecord:
    """One executor call: one expansion's thought requests or its evaluation requests."""

    role: str  # "thought" or "value"
    node_id: int  # the node being expanded
    size: int
    wall_seconds: float
    stats: GenerationStats  # the requests' stats summed (their own wall_seconds included)
    events: list[dict] | None = None  # the executor's `last_events`, when it exposes them
    merged_size: int = 0  # requests in the executor call (more than `size` when problems share it)


@dataclass
class RunMetrics:
    """Aggregate counters of one problem's search, or of many problems."""

    problems: int = 1
    new_tokens: int = 0
    wall_seconds: float = 0.0  # seconds inside executor calls
    requests: int = 0
    batches: int = 0
    draft_tokens_proposed: int = 0
    draft_tokens_accepted: int = 0
    target_forwards: int = 0
    draft_forwards: int = 0
    parse_failures: int = 0
    evaluations: int = 0
    cached_prompt_tokens: int = 0  # prompt tokens an inference server reused from its cache

    def as_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["tokens_per_second"] = self.tokens_per_second
        data["acceptance_rate"] = self.acceptance_rate
        return data

    @property
    def tokens_per_second(self) -> float | None:
        return self.new_tokens / self.wall_seconds if self.wall_seconds > 0 else None

    @property
    def acceptance_rate(self) -> float | None:
        if self.draft_tokens_proposed == 0:
            return None
        return self.draft_tokens_accepted / self.draft_tokens_proposed


def summarize(batches: Iterable[BatchRecord], parse_failures: int = 0, evaluations: int = 0) -> RunMetrics:
    """Metrics of one search from its executor calls."""
    metrics = RunMetrics(parse_failures=parse_failures, evaluations=evaluations)
    for batch in batches:
        metrics.batches += 1
        metrics.requests += batch.size
        metrics.wall_seconds += batch.wall_seconds
        for counter in dataclasses.fields(DecodeCounters):
            setattr(metrics, counter.name, getattr(metrics, counter.name) + getattr(batch.stats, counter.name))
        metrics.cached_prompt_tokens += batch.stats.cached_prompt_tokens
    return metrics


def aggregate(per_problem: Iterable[RunMetrics]) -> RunMetrics:
    """Sum of several problems' metrics (tokens/s is recomputed from the sums)."""
    total = RunMetrics(problems=0)
    for metrics in per_problem:
        for name in (f.name for f in dataclasses.fields(RunMetrics)):
            setattr(total, name, getattr(total, name) + getattr(metrics, name))
    return total


def _event_dict(event: Any) -> dict:
    if isinstance(event, dict):
        return dict(event)
    if hasattr(event, "as_dict"):
        return event.as_dict()
    if dataclasses.is_dataclass(event) and not isinstance(event, type):
        return dataclasses.asdict(event)
    if hasattr(event, "model_dump"):
        return event.model_dump()
    if hasattr(event, "_asdict"):
        return event._asdict()
    return {"event": repr(event)}


def event_records(events: Iterable[Any]) -> list[dict]:
    """Events as plain dicts; a numeric "time" becomes seconds since the batch's first event
    (clocks such as time.monotonic() have an arbitrary origin)."""
    records = [_event_dict(event) for event in events]
    times = [r["time"] for r in records if isinstance(r.get("time"), (int, float))]
    if times and len(times) == len(records):
        origin = min(times)
        records = [{**r, "time": r["time"] - origin} for r in records]
    return records


@dataclass
class BatchLog:
    """The executor calls of one search: each batch's size, timing, stats and scheduler events."""

    batches: list[BatchRecord] = field(default_factory=list)

    def add(self, role: str, node_id: int, results: list[GenerationResult], outcome: Any) -> None:
        """Record `results` of one batch; `outcome` is the BatchOutcome of the call that made them."""
        stats = GenerationStats()
        for result in results:
            stats = stats.merge(result.stats)
        self.batches.append(
            BatchRecord(
                role=role,
                node_id=node_id,
                size=len(results),
                wall_seconds=outcome.wall_seconds,
                stats=stats,
                events=outcome.events,
                merged_size=max(outcome.merged_size, len(results)),
            )
        )
