"""Scheduler event metrics on hand-built timelines, and the plots rendering to PNG."""

import pytest

from seed_tot.observe.plots import plot_schedule, plot_target_utilization
from seed_tot.scheduling.events import (
    TARGET,
    Event,
    events_as_dicts,
    intervals,
    mean_queue_wait,
    queue_waits,
    summarize,
    target_busy_fraction,
    utilization_timeline,
)


def two_worker_timeline() -> list[Event]:
    """Worker 0 drafts 0-1 s, worker 1 drafts 0-2 s; the target verifies 1-2 s (w0) and 2-3 s (w1),
    so worker 1's draft waits 0 s and worker 0's 0 s; then w0 drafts 2-3 s, waits 3-3.5, verified 3.5-4."""
    e = []
    e += [Event(100.0, "draft_start", 0, 0), Event(101.0, "draft_end", 0, 0), Event(101.0, "enqueue", 0, 0)]
    e += [Event(100.0, "draft_start", 1, 1), Event(102.0, "draft_end", 1, 1), Event(102.0, "enqueue", 1, 1)]
    e += [Event(101.0, "verify_start", 0, 0), Event(102.0, "verify_end", 0, 0), Event(102.0, "accepted", 0, 0, 2)]
    e += [Event(102.0, "verify_start", 1, 1), Event(103.0, "verify_end", 1, 1), Event(103.0, "accepted", 1, 1, 1)]
    e += [Event(102.0, "draft_start", 0, 0), Event(103.0, "draft_end", 0, 0), Event(103.0, "enqueue", 0, 0)]
    e += [Event(103.5, "verify_start", 0, 0), Event(104.0, "verify_end", 0, 0), Event(104.0, "accepted", 0, 0, 3)]
    return e


def test_intervals_pair_starts_and_ends_per_worker_and_request():
    spans = intervals(two_worker_timeline(), "draft_start", "draft_end")
    assert sorted((w, s - 100, e - 100) for w, _, s, e in spans) == [(0, 0.0, 1.0), (0, 2.0, 3.0), (1, 0.0, 2.0)]


def test_target_busy_fraction_and_queue_wait():
    events = two_worker_timeline()
    # busy 1-3 and 3.5-4 = 2.5 s over a 4 s span
    assert target_busy_fraction(events) == pytest.approx(2.5 / 4.0)
    assert sorted(queue_waits(events)) == pytest.approx([0.0, 0.0, 0.5])
    assert mean_queue_wait(events) == pytest.approx(0.5 / 3)
    summary = summarize(events)
    assert summary["verifications"] == 3 and summary["drafts"] == 3 and summary["tokens_accepted"] == 6


def test_overlapping_verifications_count_once():
    """A batched verification records one interval per request; the union must not double count."""
    events = [Event(0.0, "prefill_start", TARGET, 0), Event(1.0, "prefill_end", TARGET, 0)]
    events += [Event(1.0, "verify_start", 0, 0), Event(3.0, "verify_end", 0, 0)]
    events += [Event(1.0, "verify_start", 1, 1), Event(3.0, "verify_end", 1, 1)]
    events += [Event(4.0, "draft_end", 0, 0)]
    assert target_busy_fraction(events) == pytest.approx(3.0 / 4.0)


def test_utilization_timeline_bins():
    centres, busy = utilization_timeline(two_worker_timeline(), bins=4)
    assert centres == pytest.approx([0.5, 1.5, 2.5, 3.5])
    assert busy == pytest.approx([0.0, 1.0, 1.0, 0.5])


def test_metrics_of_too_few_events_are_none():
    assert target_busy_fraction([]) is None
    assert mean_queue_wait([]) is None
    assert utilization_timeline([Event(0.0, "draft_start", 0, 0)]) == ([], [])


def test_events_as_dicts_are_relative_and_sorted():
    rows = events_as_dicts(two_worker_timeline())
    assert rows[0]["time"] == 0.0 and rows[-1]["time"] == pytest.approx(4.0)
    assert set(rows[0]) == {"time", "kind", "worker", "request", "tokens"}


def test_plots_render_png(tmp_path):
    events = two_worker_timeline() + [Event(99.5, "prefill_start", TARGET, 0), Event(100.0, "prefill_end", TARGET, 0)]
    for path in (
        plot_schedule(events, tmp_path / "gantt.png"),
        plot_target_utilization(events, tmp_path / "sub" / "util.png", bins=8),
    ):
        data = path.read_bytes()
        assert len(data) > 1000 and data[:8] == b"\x89PNG\r\n\x1a\n"


def test_plots_refuse_empty_events(tmp_path):
    with pytest.raises(ValueError):
        plot_schedule([], tmp_path / "x.png")
    with pytest.raises(ValueError):
        plot_target_utilization([], tmp_path / "y.png")
