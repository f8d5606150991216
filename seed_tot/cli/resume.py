"""What `--resume` may continue: the settings a run folder's traces recorded against the new command's.

A resumed run adds problems to the same results, so a report reads them as one configuration. The
search (its name and every setting it records) and the target model must therefore match; the
executor, dtype and concurrency may change (each trace records its own, and they change how fast a
tree is built, not which search built it).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from seed_tot.errors import ConfigError, SeedTotError
from seed_tot.observe.comparison.runs import trace_of
from seed_tot.observe.trace import Trace
from seed_tot.records import read_json_lines


def changed_settings(stored: dict[str, Any], wanted: dict[str, Any], prefix: str = "") -> list[str]:
    """'key: stored -> wanted' for each setting both sides record with different values (nested keys
    dotted). A key only one side records (a setting added in a later version) is not a change."""
    changes = []
    for key in sorted(stored.keys() & wanted.keys()):
        old, new = stored[key], wanted[key]
        if isinstance(old, dict) and isinstance(new, dict):
            changes += changed_settings(old, new, f"{prefix}{key}.")
        elif old != new:
            changes.append(f"{prefix}{key}: {old!r} -> {new!r}")
    return changes


def known(settings: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in settings.items() if value is not None}


def first_stored_trace(out: Path) -> Trace | None:
    """The trace of the first problem in OUT/results.jsonl (None when there is none or it is missing)."""
    for row in read_json_lines(out / "results.jsonl"):
        if "trace_path" in row:
            try:
                return trace_of(out, row)
            except SeedTotError:
                return None
    return None


def check_resume(out: Path, wanted: dict[str, Any]) -> None:
    """Refuse to resume OUT with other settings. `wanted` holds task, search, search_config (as a
    trace records it) and target (None where the method names no model of its own: an engine)."""
    trace = first_stored_trace(out)
    if trace is None:
        return
    stored = {"task": trace.task, "search": trace.search, "search_config": trace.config.get("search"),
              "target": trace.models.get("target")}
    changes = changed_settings(known(stored), known(wanted))
    if changes:
        raise ConfigError(
            f"{out} holds a run with other settings ({'; '.join(changes)}): resume it with the same "
            "settings, or choose another --out."
        )
