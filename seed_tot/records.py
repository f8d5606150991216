"""What a run or a benchmark writes down, so that nothing already computed is lost and the
files can be read later: JSON lines appended and fsynced one by one, JSON files replaced
atomically, and the machine facts a measurement needs beside it.

A RecordLog holds finished work units by key: each line is {"key": ..., "record": ...}; a key
names one unit (a problem, a prompt) together with the settings it was computed under, so a
resumed run with other settings recomputes instead of mixing results. A torn last line (the
process was killed mid-write) is ignored on load.
"""

from __future__ import annotations

import json
import os
import platform
import resource
import subprocess
import tempfile
import time
from pathlib import Path

# ----------------------------------------------------------------------------- files


def append_json_lines(path: Path, entries: list[dict], end_torn_line: bool = False) -> None:
    """Append one JSON line per entry and fsync them before returning. `end_torn_line`: first
    end a last line a killed writer left unfinished, so the entries start lines of their own."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as stream:
        if end_torn_line:
            stream.write("\n")
        for entry in entries:
            stream.write(json.dumps(entry) + "\n")
        stream.flush()
        os.fsync(stream.fileno())


def _new_file_mode() -> int:
    """The mode open() gives a new file: 0o666 less the process umask (read by setting it back)."""
    umask = os.umask(0o022)
    os.umask(umask)
    return 0o666 & ~umask


def write_text_atomically(path: str | os.PathLike, text: str) -> Path:
    """Write `text` to a temporary file beside `path`, fsync it, then rename it over `path`: a
    crash leaves the old file or the new one, never half of one. Returns the path."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, temp_name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            stream.write(text)
            stream.flush()
            os.fsync(stream.fileno())
            os.fchmod(stream.fileno(), _new_file_mode())  # mkstemp's 0600 would hide it from other users
        os.replace(temp_name, target)
    except BaseException:
        Path(temp_name).unlink(missing_ok=True)
        raise
    return target


def write_json_atomically(path: str | os.PathLike, payload: dict, indent: int = 2) -> Path:
    return write_text_atomically(path, json.dumps(payload, indent=indent))


# ----------------------------------------------------------------------------- resumable work units


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
        append_json_lines(self.path, [{"key": key, "record": record}], end_torn_line=self._torn_tail)
        self._torn_tail = False

    def get_or_compute(self, key: str, compute) -> dict:
        """The stored record of `key`, else compute() stored under it."""
        record = self.get(key)
        if record is None:
            record = compute()
            self.add(key, record)
        return record


# ----------------------------------------------------------------------------- machine facts


def load_average() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def git_revision() -> str | None:
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def peak_rss_mib() -> float:
    """This process's peak resident memory so far (Linux reports kilobytes)."""
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def child_peak_rss_mib(pid: int) -> float:
    """The peak resident memory of another running process (Linux's /proc), 0 when unknown."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def machine_facts() -> dict:
    """What a benchmark record needs to be read later: when, where, under what load, which code."""
    import torch

    return {
        "at": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        "load_average": load_average(),
        "cpu_count": os.cpu_count(),
        "threads": torch.get_num_threads(),
        "platform": platform.platform(),
        "torch": torch.__version__,
        "git": git_revision(),
        "peak_rss_mib": peak_rss_mib(),
    }
