"""Shared pieces of the bundled tasks: the vendored data folder and prompt templates.

The Problem/Task contract lives in seed_tot.task (the engine depends on it, not on this package);
it is re-exported here for the tasks and for older imports.
"""

from __future__ import annotations

from pathlib import Path

from prompts import read_template
from seed_tot.task import Problem, Task

__all__ = ["DATA_DIR", "Problem", "Task", "load_template"]

DATA_DIR = Path(__file__).resolve().parent / "data"


def load_template(task: str, name: str) -> str:
    """Plain-text prompt template prompts/<task>/<name>.txt with {field} placeholders."""
    return read_template(task, name)
