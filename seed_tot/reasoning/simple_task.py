"""SimpleTask: a Task built from two prompt templates and a value parser, for quick custom searches."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from seed_tot.errors import SeedTotError
from seed_tot.task import Problem, Task

_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def first_number(text: str) -> float | None:
    """The first number in `text` (e.g. "8/10 because..." -> 8.0), or None."""
    match = _NUMBER.search(text)
    return float(match.group()) if match else None


def fill(template: str, **fields: object) -> str:
    """Replace {name} placeholders by plain substitution (other braces in the template are kept)."""
    for name, value in fields.items():
        template = template.replace("{" + name + "}", str(value))
    return template


def _normalize(answer: str) -> str:
    text = answer.strip().lower().rstrip(".")
    try:
        return repr(float(text.replace(",", "")))
    except ValueError:
        return text


@dataclass
class SimpleTask(Task):
    """A task from two templates with the placeholders {question}, {state} and {step}.

    The state is the thoughts so far, one per line. A state is terminal when `answer_pattern`
    (a regular expression with one group) matches it; the group is the answer. Without a
    pattern, the answer is the last line of the chosen state. Scores compare answers after
    trimming and lower-casing (numbers numerically).
    """

    thought_template: str
    value_template: str
    parse: Callable[[str], float | None] = first_number
    answer_pattern: str | None = None
    name: str = "custom"
    default_depth: int = 2
    fallback_value: float = 0.0
    problems: list[Problem] = field(default_factory=list)
    # For value mode "logits": verdict word -> value, and the text the evaluator's reply starts
    # with before the word (e.g. {"yes": 1.0, "no": 0.0} after "Answer:").
    verdict_values: dict[str, float] | None = None
    verdict_prefix: str = ""

    def load(self, path: str | Path | None = None) -> list[Problem]:
        """The problems given at construction, or a JSON-lines file of {"question", "answer"?, "id"?}."""
        if path is None:
            return list(self.problems)
        if not Path(path).is_file():
            raise SeedTotError(f"Problem file {str(path)!r} does not exist: check the path.")
        problems = []
        for number, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                problem_id = str(row.get("id", number))
                problems.append(Problem(id=problem_id, question=row["question"], gold=row.get("answer")))
            except (json.JSONDecodeError, KeyError, AttributeError):
                raise SeedTotError(
                    f"Line {number} of {str(path)!r} is not a JSON object with a \"question\": fix that row."
                ) from None
        return problems

    def thought_prompt(self, problem: Problem, state: str, step: int, depth: int) -> str:
        return fill(self.thought_template, question=problem.question, state=state or "(nothing yet)", step=step + 1)

    def value_prompt(self, problem: Problem, state: str, step: int) -> str:
        return fill(self.value_template, question=problem.question, state=state, step=step + 1)

    def parse_value(self, text: str) -> float | None:
        return self.parse(text)

    def extend_state(self, state: str, thought: str, step: int) -> str:
        return f"{state}{thought}\n"

    def is_terminal(self, problem: Problem, state: str, step: int, depth: int) -> bool:
        return self.answer_pattern is not None and re.search(self.answer_pattern, state) is not None

    def extract_answer(self, problem: Problem, state: str) -> str | None:
        if self.answer_pattern is not None:
            matches = list(re.finditer(self.answer_pattern, state))
            return matches[-1].group(1).strip() if matches else None
        lines = [line.strip() for line in state.splitlines() if line.strip()]
        return lines[-1] if lines else None

    def score(self, problem: Problem, answer: str | None) -> float:
        if answer is None or problem.gold is None:
            return 0.0
        return 1.0 if _normalize(answer) == _normalize(str(problem.gold)) else 0.0
