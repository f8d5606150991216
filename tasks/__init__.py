"""Tasks: data, prompts, answer parsing and scoring for GSM8K, Creative Writing, Blocksworld."""

from __future__ import annotations

from seed_tot.errors import SeedTotError
from seed_tot_tasks.base import Problem, Task
from seed_tot_tasks.blocksworld import BlocksworldTask
from seed_tot_tasks.creative_writing import CreativeWritingTask
from seed_tot_tasks.gsm8k import Gsm8kTask

_TASKS: dict[str, type] = {
    "gsm8k": Gsm8kTask,
    "creative_writing": CreativeWritingTask,
    "blocksworld": BlocksworldTask,
}
TASK_NAMES = tuple(_TASKS)


def get_task(name: str) -> Task:
    """A fresh task object by name ("creative-writing" is accepted for "creative_writing")."""
    key = name.strip().lower().replace("-", "_")
    if key not in _TASKS:
        raise SeedTotError(f"Unknown task {name!r}: choose one of {', '.join(TASK_NAMES)}.")
    return _TASKS[key]()


def bundled_task(name: str) -> Task | None:
    """The bundled task of a name (as a trace records it), or None for a task not bundled here."""
    try:
        return get_task(name)
    except SeedTotError:
        return None


__all__ = ["Problem", "Task", "TASK_NAMES", "bundled_task", "get_task", "BlocksworldTask", "CreativeWritingTask", "Gsm8kTask"]
