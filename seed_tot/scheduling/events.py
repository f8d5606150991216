"""Scheduler event records and the metrics derived from them.

Timestamps come from time.monotonic(): on Linux and macOS it reads one system-wide clock
(CLOCK_MONOTONIC / mach_absolute_time), so events recorded in the draft worker processes
and in the verifier are directly comparable. Worker -1 stands for the target model.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Iterable, Literal

EventKind = Literal[
    "draft_start",  # a worker starts drafting a tree for a request
    "draft_end",  # the draft is ready
    "enqueue",  # the draft entered the verify queue (sent to the verifier)
    "verify_start",  # the target starts verifying this draft
    "verify_end",  # the verdict is ready
    "accepted",  # tokens = drafted tokens the target accepted in this round
    "prefill_start",  # the target prefills a prompt (worker -1)
    "prefill_end",
]

TARGET = -1


def now() -> float:
    return time.monotonic()


@dataclass(frozen=True)
class Event:
    time: float
    kind: EventKind
    worker: int
    request: int
    tokens: int = 0

    def as_dict(self) -> dict:
        return asdict(self)


def events_as_dicts(events: Iterable[Event], origin: float | None = None) -> list[dict]:
    """JSON-ready records; times relative to `origin` (default: the first event)."""
    events = sorted(events, key=lambda e: e.time)
    if not events:
        return []
    start = events[0].time if origin is None else origin
    return [{**e.as_dict(), "time": e.time - start} for e in events]


def intervals(events: Iterable[Event], start_kind: str, end_kind: str) -> list[tuple[int, int, float, float]]:
    """(worker, request, start, end) for every matched start/end pair of one worker and request."""
    open_at: dict[tuple[int, int], float] = {}
    found = []
    for event in sorted(events, key=lambda e: e.time):
        key = (event.worker, event.request)
        if event.kind == start_kind:
            open_at[key] = event.time
        elif event.kind == end_kind and key in open_at:
            found.append((event.worker, event.request, open_at.pop(key), event.time))
    return found


def _union_length(spans: list[tuple[float, float]]) -> float:
    total, current_start, current_end = 0.0, None, None
    for start, end in sorted(spans):
        if current_end is None or start > current_end:
            if current_end is not None:
                total += current_end - current_start
            current_start, current_end = start, end
        else:
            current_end = max(current_end, end)
    if current_end is not None:
        total += current_end - current_start
    return total


def target_busy_spans(events: Iterable[Event]) -> list[tuple[float, float]]:
    """Time spans in which the target model was computing (verifications and prefills)."""
    events = list(events)
    spans = [(s, e) for _, _, s, e in intervals(events, "verify_start", "verify_end")]
    spans += [(s, e) for _, _, s, e in intervals(events, "prefill_start", "prefill_end")]
    return spans


def target_busy_fraction(events: Iterable[Event]) -> float | None:
    """Share of the run's span (first to last event) in which the target was busy."""
    events = list(events)
    if len(events) < 2:
        return None
    span = max(e.time for e in events) - min(e.time for e in events)
    if span <= 0:
        return None
    return _union_length(target_busy_spans(events)) / span


def queue_waits(events: Iterable[Event]) -> list[float]:
    """Seconds each draft spent in the verify queue (enqueue -> verify start)."""
    return [end - start for _, _, start, end in intervals(events, "enqueue", "verify_start")]


def mean_queue_wait(events: Iterable[Event]) -> float | None:
    waits = queue_waits(events)
    return sum(waits) / len(waits) if waits else None


def utilization_timeline(events: Iterable[Event], bins: int = 50) -> tuple[list[float], list[float]]:
    """(bin centres relative to the first event, busy fraction of the target in each bin)."""
    events = list(events)
    if len(events) < 2:
        return [], []
    t0 = min(e.time for e in events)
    t1 = max(e.time for e in events)
    width = (t1 - t0) / bins if t1 > t0 else 1.0
    busy = [0.0] * bins
    for start, end in target_busy_spans(events):
        for b in range(bins):
            lo, hi = t0 + b * width, t0 + (b + 1) * width
            overlap = min(hi, end) - max(lo, start)
            if overlap > 0:
                busy[b] += overlap
    centres = [(b + 0.5) * width for b in range(bins)]
    return centres, [min(1.0, x / width) for x in busy]


def summarize(events: Iterable[Event]) -> dict:
    """The derived scheduler metrics a trace or benchmark stores."""
    events = list(events)
    waits = queue_waits(events)
    return {
        "target_busy_fraction": target_busy_fraction(events),
        "mean_queue_wait_s": sum(waits) / len(waits) if waits else None,
        "max_queue_wait_s": max(waits) if waits else None,
        "verifications": len(intervals(events, "verify_start", "verify_end")),
        "drafts": len(intervals(events, "draft_start", "draft_end")),
        "tokens_accepted": sum(e.tokens for e in events if e.kind == "accepted"),
    }
