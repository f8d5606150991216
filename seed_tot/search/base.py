"""What every search shares: its run, its result and expansion.

A search subclasses `Search`, names itself, declares its config class (seed_tot/search/settings.py)
and implements `_search(run)`: a step generator (seed_tot/search/steps.py) that yields the batches
it needs and returns the chosen node id. `Search.steps` runs it beside the chains of thought and
takes the answer from their vote (seed_tot/search/chains.py). Expansion (`expand`) is shared, so
every tree search sends the thought requests of the states it expands as one batch and their
evaluations as a second. Searches never call the executor themselves: `Search.run` drives one
problem, and seed_tot/search/driver.py drives many at once through one executor.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import ClassVar

from seed_tot.errors import ConfigError
from seed_tot.metrics import BatchLog, BatchRecord, RunMetrics, summarize
from seed_tot.reasoning.chain_lines import LINE_DEPTH, ChainLines
from seed_tot.reasoning.evaluator import StateEvaluator
from seed_tot.reasoning.generator import ThoughtGenerator
from seed_tot.reasoning.move_chooser import MoveChooser, require_moves
from seed_tot.reasoning.prompting import PromptFormatter
from seed_tot.reasoning.random_moves import RandomMoves
from seed_tot.requests import Executor
from seed_tot.search.answers import Selection
from seed_tot.search.chains import VotedChains
from seed_tot.search.known_states import first_goal, mark_repeats
from seed_tot.search.settings import SearchConfig
from seed_tot.search.steps import Batch, BatchOutcome, Steps, drive
from seed_tot.task import Problem, Task
from seed_tot.tree import ReasoningTree, ThoughtNode

ROOT_STATE = ""  # tasks keep the question in the problem; the state holds the thoughts so far


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
    selection: Selection | None = None  # how the answer was chosen (vote counts, CoT answer)

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
    log: BatchLog
    generator: ThoughtGenerator | MoveChooser | RandomMoves | ChainLines
    evaluator: StateEvaluator
    depth_limit: int
    known_states: bool = False  # prune repeated states, stop at the goal (seed_tot/search/known_states.py)
    solved: int | None = None  # the first node shown to reach the goal (with known_states)


class Search(ABC):
    name: ClassVar[str]
    config_class: ClassVar[type[SearchConfig]] = SearchConfig
    # True when every request is a chain of thought of the whole problem (cot_prompt + cot_decode), so
    # the longest request is known before the search starts (an engine sizes its context by it).
    whole_chains_only: ClassVar[bool] = False

    def __init__(
        self, task: Task, executor: Executor | None, formatter: PromptFormatter, config: SearchConfig | None = None,
        judge=None,
    ):
        """`judge`: a seed_tot.values.judge.LearnedJudge, needed by value mode "learned"."""
        if not isinstance(task, Task):
            raise ConfigError(f"{type(task).__name__} is not a task: subclass seed_tot.Task (or build a "
                              "seed_tot.SimpleTask) so the search finds every member it reads.")
        config = config if config is not None else self.config_class()
        if not isinstance(config, self.config_class):
            raise ConfigError(
                f"{type(self).__name__} needs a {self.config_class.__name__}, got {type(config).__name__}: "
                f"build the config with {self.config_class.__name__}(...)."
            )
        self.check(task, config)
        if config.value_mode == "learned" and judge is None:
            raise ConfigError("Value mode learned needs a judge: pass judge=LearnedJudge.load(target, path).")
        self.judge = judge if config.value_mode == "learned" else None
        self.task = task
        self.executor = executor
        self.formatter = formatter
        self.config = config

    @classmethod
    def check(cls, task: Task, config: SearchConfig) -> None:
        """Raise ConfigError when this search cannot run on `task` with `config` (before any model loads)."""
        if config.thought_mode in ("choose", "random"):
            require_moves(task)
        if config.thought_mode == "line" and task.cot_prompt is None:
            raise ConfigError(f"Thought mode line continues the task's chain-of-thought prompt; {task.name} has none: "
                              "use --thought-mode sample.")
        if config.vote_weight == "value" and config.value_mode != "learned":
            raise ConfigError("A value-weighted vote needs every answer rated: use it with --value-mode learned.")

    def run(self, problem: Problem) -> SearchResult:
        """Search one problem on this search's executor."""
        if self.executor is None:
            raise ConfigError("This search was built without an executor: pass one, or drive steps() yourself.")
        return drive(self.steps(problem), self.executor)

    def steps(self, problem: Problem) -> Steps[SearchResult]:
        """The search of one problem as a step generator (yields batches, returns the result): the
        search's own steps (`_search`) beside the chains of thought and their vote (seed_tot/search/chains.py)."""
        cfg = self.config
        depth_limit = step_limit(self.task, cfg)
        tree = ReasoningTree()
        tree.add_root(ROOT_STATE)
        run = SearchRun(
            problem=problem,
            tree=tree,
            log=BatchLog(),
            generator=thought_generator(self.task, self.formatter, cfg, depth_limit),
            evaluator=StateEvaluator(
                self.task, self.formatter, cfg.value_decode, cfg.seed, samples=cfg.value_samples,
                mode=cfg.value_mode, judge=self.judge,
            ),
            depth_limit=depth_limit,
            known_states=cfg.known_states,
        )
        chains = VotedChains(self.task, self.formatter, cfg, self.judge, chains_only=self.whole_chains_only)
        selection = yield from chains.decide(problem, tree, run.log, self._search(run))
        score = float(self.task.score(problem, selection.answer)) if problem.gold is not None else None
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
            chosen_path=tree.path_to(selection.node_id),
            answer=selection.answer,
            score=score,
            batches=run.log.batches,
            metrics=metrics,
            selection=selection,
        )

    @abstractmethod
    def _search(self, run: SearchRun) -> Steps[int]:
        """Build the tree in `run.tree` (yielding batches); return the id of the node the search chose."""


def is_dead_end(node: ThoughtNode) -> bool:
    return bool(node.info.get("dead_end"))


def step_limit(task: Task, config: SearchConfig) -> int:
    """The config's depth, else the task's (in thought mode line, where a step is a line: LINE_DEPTH)."""
    if config.depth is not None:
        return config.depth
    return LINE_DEPTH if config.thought_mode == "line" else int(task.default_depth)


def thought_generator(
    task: Task, formatter: PromptFormatter, config: SearchConfig, depth: int
) -> ThoughtGenerator | MoveChooser | RandomMoves | ChainLines:
    """The config's thought mode's generator; `depth` (the step limit) reaches the task's prompts."""
    if config.thought_mode == "line":
        return ChainLines(task, formatter, config.thought_decode, config.n_thoughts, config.seed)
    if config.thought_mode == "choose":
        return MoveChooser(task, formatter, config.n_thoughts, config.seed, depth)
    if config.thought_mode == "random":
        return RandomMoves(task, config.n_thoughts, config.seed, depth)
    return ThoughtGenerator(task, formatter, config.thought_decode, config.n_thoughts, config.seed, depth)


def expand(run: SearchRun, node_ids: list[int]) -> Steps[list[ThoughtNode]]:
    """Add n children to each node: one batch of every thought request, then one batch of
    every evaluation request (k per child that no rule rejects)."""
    nodes = [run.tree.node(node_id) for node_id in node_ids]
    per_node = [run.generator.requests(run.problem, node) for node in nodes]
    thought_requests = [r for rs in per_node for r in rs]
    outcome: BatchOutcome = yield Batch("thought", node_ids[0], thought_requests)
    if thought_requests:  # none when every node is a dead end (thought mode "choose")
        run.log.add("thought", node_ids[0], outcome.results, outcome)
    children, start = [], 0
    for node, requests in zip(nodes, per_node, strict=True):
        results = outcome.results[start : start + len(requests)]
        start += len(requests)
        thoughts = run.generator.read(run.problem, node, requests, results)
        if not thoughts:
            node.info["dead_end"] = True  # the task lists no move from here (thought mode "choose")
        for thought in thoughts:
            truncated = thought.finish_reason == "length"
            child = run.tree.add_child(
                node.id,
                thought=thought.text,
                state=thought.state,
                kind="answer" if thought.terminal and not truncated else "thought",
                generation=thought.stats,
            )
            child.seeds["thought"] = thought.seed
            child.info["finish_reason"] = thought.finish_reason
            if thought.move_probability is not None:
                child.info["move_probability"] = thought.move_probability
            children.append(child)
    if run.known_states:
        mark_repeats(run.evaluator.task, run.problem, run.tree, children)
    value_requests = run.evaluator.requests(run.problem, children)
    outcome = yield Batch("value", node_ids[0], value_requests)
    if value_requests:
        run.log.add("value", node_ids[0], outcome.results, outcome)
    for child, evaluation in zip(children, run.evaluator.read(run.problem, children, value_requests, outcome.results), strict=True):
        child.value = evaluation.value
        child.value_parsed = evaluation.parsed
        child.raw_values = evaluation.raw
        child.evaluation = evaluation.stats
        for index, seed in enumerate(evaluation.seeds):
            child.seeds[f"value{index}"] = seed
        if evaluation.rejected is not None:
            child.info["rejected"] = evaluation.rejected
        if len(evaluation.sample_values) > 1:
            child.info["sample_values"] = evaluation.sample_values
        if evaluation.verdict_probs is not None:
            child.info["verdict_probs"] = evaluation.verdict_probs
            child.info["verdict_mass"] = evaluation.verdict_mass
    if run.known_states and run.solved is None:
        run.solved = first_goal(run.evaluator.task, run.problem, children)
    return children
