"""The contract between a task and the reasoning-tree engine.

A task knows its data, fills its prompt templates, turns model output into states, values and
answers, and scores answers. It never sees a model or a tensor. The engine (seed_tot) depends
only on this module; the bundled tasks (the `tasks` package) implement it.

Optional members the engine uses when a task has them (not part of the protocol below):
- `check_step(problem, state) -> str | None`: why the newest step is certainly wrong (no model asked);
- `verdict_values: dict[str, float]`, `verdict_prefix: str`: the evaluator's verdict words and the
  text its reply starts with before the word (value mode "logits", seed_tot/reasoning/evaluator.py);
- `state_key(problem, state) -> Hashable | None`: a name of the position a state reaches; states
  with one name are the same position (the search prunes repeats, seed_tot/search/known_states.py);
- `reaches_goal(problem, state) -> bool`: the task can show that the state solves the problem
  (the search stops there);
- `next_moves(problem, state, step) -> list[str]`: the moves a state allows, each worded as a
  thought (thought mode "choose": the target ranks them by the probability of writing each after
  the thought prompt instead of sampling thoughts, seed_tot/reasoning/move_chooser.py);
- `judge_prompt(answer) -> str` and `judge_record(reply) -> dict`: a model grades the final answer
  beside `score` (Creative Writing's 1-10 coherency): the target answers the prompt greedily and
  the fields judge_record reads from its reply join the problem's record
  (seed_tot/reasoning/judge.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable


@dataclass
class Problem:
    id: str
    question: str  # the task input as text
    gold: Any  # gold answer (number, sentences, plan), task-specific
    meta: dict = field(default_factory=dict)


@runtime_checkable
class Task(Protocol):
    name: str
    default_depth: int  # tree depth T used by the paper for this task
    fallback_value: float  # value given to an evaluation the parser could not read

    def load(self, path: str | Path | None = None) -> list[Problem]:
        """Problems from the vendored data (path None) or from a user file."""

    def thought_prompt(self, problem: Problem, state: str, step: int) -> str:
        """User message asking for the next thought from `state` (step counts from 0)."""

    def value_prompt(self, problem: Problem, state: str, step: int) -> str:
        """User message asking the State Evaluator to rate `state`."""

    def parse_value(self, text: str) -> float | None:
        """Value from an evaluator reply, or None when it cannot be parsed."""

    def extend_state(self, state: str, thought: str, step: int) -> str:
        """The state reached by appending a generated thought."""

    def is_terminal(self, problem: Problem, state: str, step: int) -> bool:
        """True when `state` already holds a final answer."""

    def extract_answer(self, problem: Problem, state: str) -> str | None:
        """The final answer found in a state (None when there is none)."""

    def score(self, problem: Problem, answer: str | None) -> float:
        """1.0 for a correct answer, 0.0 for a wrong one; fractional where the task grades."""
