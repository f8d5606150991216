"""Shared pieces of the bundled tasks: the vendored data folder and prompt templates.

The Problem/Task contract lives in seed_tot.task (the engine depends on it, not on this package);
it is re-exported here for the tasks and for older imports.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from seed_tot_prompts import read_template
from seed_tot.records import portable_path
from seed_tot.task import Problem, Task

__all__ = ["DATA_DIR", "Problem", "Task", "data_file_name", "data_file_record", "load_template", "row_id"]

DATA_DIR = Path(__file__).resolve().parent / "data"


def load_template(task: str, name: str) -> str:
    """Plain-text prompt template prompts/<task>/<name>.txt with {field} placeholders."""
    return read_template(task, name)


def row_id(row: dict, prefix: str, source: Path, bundled: Path, line_no: int) -> str:
    """A row's own "id", else "<prefix>-<line>" in the bundled file and "<file stem>-line<line>" in a
    user's file, so a user's row never takes the id (and so the gold answer) of a bundled one."""
    if "id" in row:
        return str(row["id"])
    if source.resolve() == bundled.resolve():
        return f"{prefix}-{line_no}"
    return f"{source.stem}-line{line_no}"


def data_file_name(path: Path) -> str:
    """How a record names a data file: a bundled one by its path in the repository
    (`tasks/data/gsm8k/test.jsonl`, wherever the package is installed), a user's one as
    `seed_tot.records.portable_path` names it (relative to the working directory where it lies below it)."""
    resolved = Path(path).resolve()
    if resolved.is_relative_to(DATA_DIR):
        return f"tasks/data/{resolved.relative_to(DATA_DIR).as_posix()}"
    return portable_path(path)


def data_file_record(path: Path) -> dict[str, str]:
    """Which data file a run read: its name (`data_file_name`) and sha256 (recorded in traces and runs.jsonl)."""
    digest = hashlib.sha256(Path(path).read_bytes()).hexdigest()
    return {"path": data_file_name(path), "sha256": digest}
