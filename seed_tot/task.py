"""The contract between a task and the reasoning-tree engine.

A task knows its data, fills its prompt templates, turns model output into states, values and
answers, and scores answers. It never sees a model or a tensor. The engine (seed_tot) depends
only on this module; the bundled tasks (the `tasks` package) implement it.

A task subclasses `Task`. The members without a default (`name`, `default_depth`,
`fallback_value` and the abstract methods) are required; every other member is optional and
its default here is what the engine does for a task that leaves it alone. An optional ability
whose default is None is one the task does not have (no chain-of-thought prompt, no move list,
no simulator): the engine checks for None and never calls it. docs/api.md tables the contract.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from seed_tot.errors import SeedTotError

DEFAULT_THOUGHT_TOKENS = 256  # a thought's token budget when neither the task nor the command names one


@dataclass
class Problem:
    id: str
    question: str  # the task input as text
    gold: Any  # gold answer (number, sentences, plan), task-specific
    meta: dict = field(default_factory=dict)


def select_problems(problems: list, start: int = 0, limit: int | None = None, ids: tuple[str, ...] = ()) -> list:
    """Problems by explicit ids (in the given order), else the slice [start, start + limit)."""
    if ids:
        by_id = {p.id: p for p in problems}
        missing = [i for i in ids if i not in by_id]
        if missing:
            raise SeedTotError(
                f"Unknown problem id(s) {', '.join(missing[:5])}: ids run from {problems[0].id} to {problems[-1].id}."
            )
        return [by_id[i] for i in ids]
    if start < 0 or start >= len(problems):
        raise SeedTotError(f"--start {start} is outside the data set of {len(problems)} problems.")
    end = len(problems) if limit is None else start + limit
    return problems[start:end]


class Task(ABC):
    """What the engine asks of a task; subclass it and override what your task can do."""

    # --- required -------------------------------------------------------------------------
    name: str  # the task's name in traces, records and the CLI
    default_depth: int  # tree depth T when the search config names none
    fallback_value: float  # value given to an evaluation the parser could not read

    @abstractmethod
    def load(self, path: str | Path | None = None) -> list[Problem]:
        """Problems from the vendored data (path None) or from a user file."""

    @abstractmethod
    def thought_prompt(self, problem: Problem, state: str, step: int, depth: int) -> str:
        """User message asking for the next thought from `state` (step counts from 0; `depth` is the
        search's step limit T, so step depth-1 is the tree's last: GSM8K asks its closing question there)."""

    @abstractmethod
    def value_prompt(self, problem: Problem, state: str, step: int) -> str:
        """User message asking the State Evaluator to rate `state`."""

    @abstractmethod
    def parse_value(self, text: str) -> float | None:
        """Value from an evaluator reply, or None when it cannot be parsed."""

    @abstractmethod
    def extend_state(self, state: str, thought: str, step: int) -> str:
        """The state reached by appending a generated thought."""

    @abstractmethod
    def is_terminal(self, problem: Problem, state: str, step: int, depth: int) -> bool:
        """True when `state` (reached at `step` of a search `depth` steps deep) already holds a final answer."""

    @abstractmethod
    def extract_answer(self, problem: Problem, state: str) -> str | None:
        """The final answer found in a state (None when there is none)."""

    @abstractmethod
    def score(self, problem: Problem, answer: str | None) -> float:
        """1.0 for a correct answer, 0.0 for a wrong one; fractional where the task grades."""

    # --- prompts --------------------------------------------------------------------------
    thought_stop: tuple[str, ...] = ()  # strings that end a thought (e.g. where a second step would begin)
    thought_tokens: int = DEFAULT_THOUGHT_TOKENS  # the CLI's thought budget when --max-new-tokens is not given
    # cot_prompt(problem) -> str: one prompt for a whole chain of thought (the CoT candidate of the
    # vote, self-consistency, best-of-n, learned values). None: the task has no such prompt.
    cot_prompt: Callable[[Problem], str] | None = None

    def cot_state(self, text: str) -> str:
        """A generated chain of thought as a state (by default the text as it is)."""
        return text

    # --- evaluator ------------------------------------------------------------------------
    value_stop: tuple[str, ...] = ()  # strings that end an evaluator reply (e.g. once the verdict is written)
    # value mode "logits": verdict word -> value, read from the probabilities of the reply's first
    # word after `verdict_prefix`. None: the task's values cannot be read from logits.
    verdict_values: dict[str, float] | None = None
    verdict_prefix: str = ""  # the text an evaluator reply starts with before the verdict word

    def check_step(self, problem: Problem, state: str) -> str | None:
        """Why the newest step is certainly wrong, found without a model; None (the default) when
        no rule rejects it. A rejected state is valued 0.0 and no evaluator request is sent."""
        return None

    # judge_prompt(answer) -> str and judge_record(reply) -> dict: a model grades the final answer
    # beside `score` (Creative Writing's 1-10 coherency): the target answers the prompt greedily and
    # the fields judge_record reads from its reply join the problem's record. None: no judge.
    judge_prompt: Callable[[str], str] | None = None
    judge_record: Callable[[str], dict] | None = None

    # --- search defaults (the CLI's, where the command names none) -----------------------
    default_search: str = "bfs"
    default_search_unscored: str | None = None  # for methods that cannot score; None: default_search
    default_thought_mode: str = "sample"  # used only by methods that can score
    default_value_mode: str = "samples"  # used only by methods that can score
    # True: where a value head ships for the target and the method runs the target in this process,
    # self-consistency's vote is weighted by the learned judge's values (--value-mode learned
    # --vote-weight value) unless the command names a value mode or vote weight; elsewhere, and for
    # other targets, the plain vote
    judged_vote: bool = False
    votable: bool = False  # equal answers of different leaves can be counted in a majority vote

    # --- simulator abilities (None: the task cannot tell) ---------------------------------
    # state_key(problem, state) -> Hashable | None: a name of the position a state reaches; states
    # with one name are the same position and the search prunes repeats (None for a state without one).
    state_key: Callable[[Problem, str], Hashable | None] | None = None
    # reaches_goal(problem, state) -> bool: the task can show that the state solves the problem;
    # the search stops there and the state's answer wins.
    reaches_goal: Callable[[Problem, str], bool] | None = None
    # next_moves(problem, state, step) -> list[str]: the moves a state allows, each worded as a
    # thought (thought modes "choose" and "random" pick among them instead of sampling thoughts).
    next_moves: Callable[[Problem, str, int], list[str]] | None = None

    # --- data -----------------------------------------------------------------------------
    default_data_path: Path | None = None  # the bundled problems load() reads when given no path
    train_data_path: Path | None = None  # problems a value head may be trained on (seed-tot train value)

