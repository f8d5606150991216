"""An append-only JSON-lines log of finished work units, so a long run can stop and resume.

Each line is {"key": ..., "record": ...}; a key names one unit (a problem, a prompt) together
with the settings it was computed under, so a resumed run with other settings recomputes
instead of mixing results. Lines are flushed and fsynced as they are written; a torn last
line (the process was killed mid-write) is ignored on load.
"""

from __future__ import annotations

import json
import os
from pathlib import Path


def settings_key(unit: str, settings: dict) -> str:
    """The key of one work unit under the given settings."""
    return f"{unit}|{json.dumps(settings, sort_keys=True)}"


class RecordLog:
    """Finished work units by key, backed by a JSON-lines file (or memory only when path is None)."""

    def __init__(self, path: str | Path | None):
        self.path = Path(path) if path is not None else None
        self.records: dict[str, dict] = {}
        self._torn_tail = False
        if self.path is not None and self.path.is_file():
            text = self.path.read_text()
            self._torn_tail = bool(text) and not text.endswith("\n")
            for line in text.splitlines():
                try:
                    entry = json.loads(line)
                except json.JSONDecodeError:
                    continue
                if isinstance(entry, dict) and "key" in entry and "record" in entry:
                    self.records[entry["key"]] = entry["record"]

    def get(self, key: str) -> dict | None:
        return self.records.get(key)

    def add(self, key: str, record: dict) -> None:
        self.records[key] = record
        if self.path is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a") as stream:
            if self._torn_tail:  # end the torn line so this record starts a line of its own
                stream.write("\n")
                self._torn_tail = False
            stream.write(json.dumps({"key": key, "record": record}) + "\n")
            stream.flush()
            os.fsync(stream.fileno())

    def get_or_compute(self, key: str, compute) -> dict:
        """The stored record of `key`, else compute() stored under it."""
        record = self.get(key)
        if record is None:
            record = compute()
            self.add(key, record)
        return record
