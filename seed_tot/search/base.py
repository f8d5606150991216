"""What every search shares: its config, its result, and one expansion step.

A search subclasses `Search`, names itself, declares its config class and implements
`_search(run) -> chosen node id`. Expansion (`expand`) is shared, so every search sends the
n thought requests of a node as one batch and the n evaluation requests as a second batch.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field

from seed_tot.config import DecodeConfig
from seed_tot.errors import ConfigError
from seed_tot.metrics import BatchRecord, ExecutorLog, RunMetrics, summarize
from seed_tot.reasoning.evaluator import StateEvaluator
from seed_tot.reasoning.generator import ThoughtGenerator
from seed_tot.reasoning.prompting import PromptFormatter
from seed_tot.scheduling.requests import Executor
from seed_tot.search.tree import ReasoningTree, ThoughtNode
from tasks.base import Problem, Task

ROOT_STATE = ""  # tasks keep the question in the problem; the state holds the thoughts so far


class SearchConfig(BaseModel):
    """Settings every search shares."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    n_thoughts: int = Field(3, ge=1, description="thoughts generated per expanded state (n)")
    depth: int | None = Field(None, ge=1, description="step limit T; None uses the task's default depth")
    thought_decode: DecodeConfig = DecodeConfig(max_new_tokens=128, temperature=1.0)
    value_decode: DecodeConfig = DecodeConfig(max_new_tokens=128, temperature=0.0)
    seed: int = 0


@dataclass
class SearchResult:
    problem: Problem
    search: str
    config: SearchConfig
    tree: ReasoningTree
    chosen_path: list[int]
    answer: str | None
    score: float | None  # None when the problem has no gold answer
    batches: list[BatchRecord]
    metrics: RunMetrics

    @property
    def correct(self) -> bool | None:
        """True/False for a task that scores 0 or 1; None for graded scores or no gold."""
        if self.score is None or self.score not in (0.0, 1.0):
            return None
        return self.score == 1.0

    @property
    def chosen(self) -> ThoughtNode:
        return self.tree.node(self.chosen_path[-1])


@dataclass
class SearchRun:
    """Everything one search of one problem works on."""

    problem: Problem
    tree: ReasoningTree
    log: ExecutorLog
    generator: ThoughtGenerator
    evaluator: StateEvaluator
    depth_limit: int


class Search(ABC):
    name: ClassVar[str]
    config_class: ClassVar[type[SearchConfig]] = SearchConfig

    def __init__(
        self, task: Task, executor: Executor, formatter: PromptFormatter, config: SearchConfig | None = None
    ):
        config = config if config is not None else self.config_class()
        if not isinstance(config, self.config_class):
            raise ConfigError(
                f"{type(self).__name__} needs a {self.config_class.__name__}, got {type(config).__name__}: "
                f"build the config with {self.config_class.__name__}(...)."
            )
        self.task = task
        self.executor = executor
        self.formatter = formatter
        self.config = config

    def run(self, problem: Problem) -> SearchResult:
        cfg = self.config
        tree = ReasoningTree()
        tree.add_root(ROOT_STATE)
        run = SearchRun(
            problem=problem,
            tree=tree,
            log=ExecutorLog(self.executor),
            generator=ThoughtGenerator(self.task, self.formatter, cfg.thought_decode, cfg.n_thoughts, cfg.seed),
            evaluator=StateEvaluator(self.task, self.formatter, cfg.value_decode, cfg.seed),
            depth_limit=cfg.depth if cfg.depth is not None else int(self.task.default_depth),
        )
        chosen_id = self._search(run)
        chosen = tree.node(chosen_id)
        answer = self.task.extract_answer(problem, chosen.state)
        score = float(self.task.score(problem, answer)) if problem.gold is not None else None
        evaluated = [node for node in tree.nodes() if node.value_parsed is not None]
        metrics = summarize(
            run.log.batches,
            parse_failures=sum(1 for node in evaluated if not node.value_parsed),
            evaluations=len(evaluated),
        )
        return SearchResult(
            problem=problem,
            search=self.name,
            config=cfg,
            tree=tree,
            chosen_path=tree.path_to(chosen_id),
            answer=answer,
            score=score,
            batches=run.log.batches,
            metrics=metrics,
        )

    @abstractmethod
    def _search(self, run: SearchRun) -> int:
        """Build the tree in `run.tree`; return the id of the node whose state gives the answer."""


def expand(run: SearchRun, node_id: int) -> list[ThoughtNode]:
    """Add n children to a node: one batch of n thought requests, then one batch of n evaluations."""
    node = run.tree.node(node_id)
    requests = run.generator.requests(run.problem, node)
    thoughts = run.generator.read(run.problem, node, requests, run.log.run("thought", node_id, requests))
    children = []
    for thought in thoughts:
        child = run.tree.add_child(
            node_id,
            thought=thought.text,
            state=thought.state,
            kind="answer" if thought.terminal else "thought",
            generation=thought.stats,
        )
        child.seeds["thought"] = thought.seed
        child.info["finish_reason"] = thought.finish_reason
        children.append(child)
    value_requests = run.evaluator.requests(run.problem, children)
    evaluations = run.evaluator.read(value_requests, run.log.run("value", node_id, value_requests))
    for child, evaluation in zip(children, evaluations, strict=True):
        child.value = evaluation.value
        child.value_parsed = evaluation.parsed
        child.raw_values = [evaluation.raw]
        child.evaluation = evaluation.stats
        child.seeds["value"] = evaluation.seed
    return children


def value_key(node: ThoughtNode) -> tuple[float, int]:
    """Sort key: higher value first, then lower id (ties break the same way every run)."""
    return (-(node.value if node.value is not None else float("-inf")), node.id)
