"""The Task contract (seed_tot/task.py): every optional member is declared on the base with its
default, the engine reads members instead of probing for them, the bundled tasks give each
member a value of the documented type, and docs/api.md tables every member."""

import re
from pathlib import Path
from typing import get_args

import pytest
from search_helpers import FORMATTER

from seed_tot.errors import ConfigError
from seed_tot.reasoning.simple_task import SimpleTask
from seed_tot.search import BFS, SEARCHES
from seed_tot.search.settings import SearchConfig
from seed_tot.reasoning.evaluator import VALUE_MODES
from seed_tot.task import Task
from seed_tot_tasks import TASK_NAMES, get_task

ROOT = Path(__file__).resolve().parents[1]
PROBE = re.compile(r"\b(?:get|has)attr\(\s*[\w.]*task\w*\s*,")  # getattr(task, ...), hasattr(self.task, ...)
REQUIRED_ATTRIBUTES = {"name", "default_depth", "fallback_value"}
THOUGHT_MODES = set(get_args(SearchConfig.model_fields["thought_mode"].annotation))


def optional_or(check):
    return lambda value: value is None or check(value)


def strings(value) -> bool:
    return isinstance(value, tuple) and all(isinstance(item, str) for item in value)


def verdicts(value) -> bool:
    return isinstance(value, dict) and bool(value) and all(
        isinstance(word, str) and isinstance(number, (int, float)) for word, number in value.items())


def data_file(value) -> bool:
    return isinstance(value, Path) and value.is_file()


OPTIONAL_TYPES = {  # member -> the documented type of its value
    "thought_stop": strings,
    "thought_tokens": lambda value: isinstance(value, int) and value > 0,
    "cot_prompt": optional_or(callable),
    "cot_state": callable,
    "value_stop": strings,
    "verdict_values": optional_or(verdicts),
    "verdict_prefix": lambda value: isinstance(value, str),
    "check_step": callable,
    "judge_prompt": optional_or(callable),
    "judge_record": optional_or(callable),
    "default_search": lambda value: value in SEARCHES,
    "default_search_unscored": optional_or(lambda value: value in SEARCHES),
    "default_thought_mode": lambda value: value in THOUGHT_MODES,
    "default_value_mode": lambda value: value in VALUE_MODES,
    "votable": lambda value: isinstance(value, bool),
    "judged_vote": lambda value: isinstance(value, bool),
    "state_key": optional_or(callable),
    "reaches_goal": optional_or(callable),
    "next_moves": optional_or(callable),
    "default_data_path": optional_or(data_file),
    "train_data_path": optional_or(data_file),
}


def required_members() -> set[str]:
    return REQUIRED_ATTRIBUTES | set(Task.__abstractmethods__)


def optional_members() -> set[str]:
    return {name for name in vars(Task) if not name.startswith("_")} - required_members()


def probes(path: Path) -> list[str]:
    return [f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
            if PROBE.search(line)]


def test_no_code_probes_a_task_for_a_member():
    found = [hit for folder in ("seed_tot", "tasks", "scripts") for path in sorted((ROOT / folder).rglob("*.py"))
             for hit in probes(path)]
    assert found == [], "read the member declared on seed_tot.Task instead:\n" + "\n".join(found)


def test_the_probe_pattern_catches_the_usual_spellings():
    for line in ('getattr(task, "cot_prompt", None)', "hasattr(self.task, 'state_key')", "getattr( run_task ,'x')"):
        assert PROBE.search(line), line
    assert not PROBE.search('getattr(executor, "name", None)')


def test_every_optional_member_has_a_documented_type_and_a_default():
    assert set(OPTIONAL_TYPES) == optional_members()
    for name, check in OPTIONAL_TYPES.items():
        assert check(getattr(Task, name)), name


@pytest.mark.parametrize("task", [get_task(name) for name in TASK_NAMES] + [SimpleTask("t", "v")],
                         ids=[*TASK_NAMES, "simple"])
def test_each_bundled_task_meets_the_contract(task):
    assert isinstance(task, Task)
    assert isinstance(task.name, str) and task.name
    assert isinstance(task.default_depth, int) and task.default_depth > 0
    assert isinstance(task.fallback_value, (int, float))
    wrong = [name for name, check in OPTIONAL_TYPES.items() if not check(getattr(task, name))]
    assert wrong == []
    assert (task.judge_prompt is None) == (task.judge_record is None)  # a judge needs both halves


def test_bundled_tasks_name_their_data():
    for name in TASK_NAMES:
        assert get_task(name).default_data_path is not None, name


def test_the_api_docs_table_every_member():
    text = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| `(\w+)", text, re.MULTILINE)
    missing = (required_members() | optional_members()) - set(rows)
    assert not missing, f"docs/api.md has no row for {sorted(missing)}"


def test_a_search_refuses_an_object_that_is_not_a_task():
    class LooksLikeATask:
        name = "duck"

    with pytest.raises(ConfigError, match="subclass seed_tot.Task"):
        BFS(LooksLikeATask(), None, FORMATTER)
