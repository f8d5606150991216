"""What a run or a benchmark writes down, so that nothing already computed is lost and the
files can be read later: JSON lines appended and fsynced one by one, JSON files replaced
atomically. The machine facts a
measurement needs beside it are seed_tot/machine_facts.py's.

- A task run's results.jsonl: one ProblemRecord per finished problem (resume skips them), and
  failed.jsonl beside it: problems a run could not finish (resume tries them again).
- A RecordLog holds finished work units by key: each line is {"key": ..., "record": ...}; a key
  names one unit (a problem, a prompt) together with the settings it was computed under, so a
  resumed benchmark with other settings recomputes instead of mixing results.
A torn last line (the process was killed mid-write) is ignored on load.

Stored files may be kept gzip-compressed beside where they were written (results/ keeps its traces
as `<id>.json.gz`): `stored_file`, `read_stored_text` and `stored_files` read `PATH` or `PATH.gz`
alike, so the readers of traces (`seed-tot report`, `seed-tot trace`, the scripts) need no flag.
"""

from __future__ import annotations

import gzip
import json
import os
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

# ----------------------------------------------------------------------------- files


GZIP_SUFFIX = ".gz"


def stored_file(path: str | os.PathLike) -> Path:
    """`path`, or its gzip-compressed copy `path.gz` where only that one is stored."""
    source = Path(path)
    if source.suffix != GZIP_SUFFIX and not source.exists():
        packed = source.with_name(source.name + GZIP_SUFFIX)
        if packed.is_file():
            return packed
    return source


def read_stored_text(path: str | os.PathLike) -> str:
    """The text of `path` (UTF-8), decompressed when it, or the `path.gz` stored instead of it, is
    gzip-compressed. Raises FileNotFoundError when neither exists; gzip.BadGzipFile or EOFError
    for a damaged compressed file."""
    source = stored_file(path)
    if source.suffix == GZIP_SUFFIX:
        with gzip.open(source, "rt", encoding="utf-8") as stream:
            return stream.read()
    return source.read_text(encoding="utf-8")


def stored_files(folder: str | os.PathLike, pattern: str, recursive: bool = True) -> list[Path]:
    """Files in `folder` (and below it, `recursive`) that match `pattern`, plain or compressed
    (`pattern.gz`), sorted by their plain name; where both copies are stored, the plain one."""
    root = Path(folder)
    glob = root.rglob if recursive else root.glob
    found: dict[Path, Path] = {}
    for path in glob(pattern + GZIP_SUFFIX):
        found.setdefault(path.with_name(path.name.removesuffix(GZIP_SUFFIX)), path)
    for path in glob(pattern):
        found[path] = path
    return [found[name] for name in sorted(found)]


def portable_path(path: str | os.PathLike, root: str | os.PathLike | None = None) -> str:
    """How a record names a file so that the name means the same on another machine: a relative
    path as given; an absolute one relative to `root` (default: the working directory) where it
    lies below it, as `~/...` where it lies in the home folder, else as given."""
    source = Path(path)
    if not source.is_absolute():
        return source.as_posix()
    for base, name in ((Path(root) if root is not None else Path.cwd(), "."), (Path.home(), "~")):
        base = base.resolve()
        if source == base:
            return name
        if source.is_relative_to(base):
            inner = source.relative_to(base).as_posix()
            return inner if name == "." else f"{name}/{inner}"
    return source.as_posix()


def portable_command(argv: list[str], root: str | os.PathLike | None = None) -> str:
    """A command line as a record writes it: the running interpreter as `python`, absolute paths
    named as `portable_path` names them, quoted for a shell."""
    import shlex
    import sys

    words = ["python" if i == 0 and word == sys.executable else
             portable_path(word, root) if os.path.isabs(word) else word for i, word in enumerate(argv)]
    return shlex.join(words)


def append_json_lines(path: Path, entries: list[dict]) -> None:
    """Append one JSON line per entry and fsync them before returning. A last line that a killed
    writer left unfinished is ended first, so the entries start lines of their own."""
    path.parent.mkdir(parents=True, exist_ok=True)
    torn = _ends_mid_line(path)
    with path.open("a") as stream:
        if torn:
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


def _ends_mid_line(path: Path) -> bool:
    try:
        with path.open("rb") as stream:
            stream.seek(-1, os.SEEK_END)
            return stream.read(1) != b"\n"
    except OSError:  # no such file, or an empty one
        return False


def json_objects(text: str) -> list[dict]:
    """The JSON objects of JSON-lines text, one a line; lines that do not parse (a torn last line
    from a crash) or hold something else are skipped."""
    objects = []
    for line in text.splitlines():
        try:
            value = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict):
            objects.append(value)
    return objects


def read_json_lines(path: Path) -> list[dict]:
    """The JSON objects of a JSON-lines file (none when it does not exist), as json_objects reads them."""
    return json_objects(path.read_text(encoding="utf-8")) if path.is_file() else []


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


# ----------------------------------------------------------------------------- a task run's results


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
    finished_after_s: float | None = None  # seconds from the run's first request to this answer


def finished_ids(results_path: Path) -> set[str]:
    """Ids already recorded in a results file (a torn last line from a crash is ignored)."""
    return {entry["problem_id"] for entry in read_json_lines(results_path) if "problem_id" in entry}


def append_record(results_path: Path, record: ProblemRecord) -> None:
    """Append one JSON line and flush it to disk before the next problem starts."""
    append_json_lines(results_path, [asdict(record)])


def load_records(results_path: Path) -> list[ProblemRecord]:
    records = []
    for entry in read_json_lines(results_path):
        try:
            records.append(ProblemRecord(**entry))
        except TypeError:  # not a results row
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
    append_json_lines(path, [{"problem_id": problem_id, "error": error, "attempts": attempts, "workers": workers}])
    return path


# ----------------------------------------------------------------------------- resumable work units


def settings_key(unit: str, settings: dict) -> str:
    """The key of one work unit under the given settings."""
    return f"{unit}|{json.dumps(settings, sort_keys=True)}"


class RecordLog:
    """Finished work units by key, backed by a JSON-lines file (or memory only when path is None)."""

    def __init__(self, path: str | Path | None):
        self.path = Path(path) if path is not None else None
        self.records: dict[str, dict] = {}
        for entry in read_json_lines(self.path) if self.path is not None else []:
            if "key" in entry and "record" in entry:
                self.records[entry["key"]] = entry["record"]

    def get(self, key: str) -> dict | None:
        return self.records.get(key)

    def add(self, key: str, record: dict) -> None:
        self.records[key] = record
        if self.path is None:
            return
        append_json_lines(self.path, [{"key": key, "record": record}])

    def get_or_compute(self, key: str, compute) -> dict:
        """The stored record of `key`, else compute() stored under it."""
        record = self.get(key)
        if record is None:
            record = compute()
            self.add(key, record)
        return record
