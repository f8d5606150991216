"""What every search shares: its config, its result, expansion and answer selection.

A search subclasses `Search`, names itself, declares its config class and implements
`_search(run)`: a step generator (seed_tot/search/steps.py) that yields the batches it needs
and returns the chosen node id. Expansion (`expand`) is shared, so every search sends the
thought requests of the states it expands as one batch and their evaluations as a second.
Searches never call the executor themselves: `Search.run` drives one problem, and
seed_tot/search/driver.py drives many at once through one executor.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from seed_tot.config import DecodeConfig
from seed_tot.errors import ConfigError
from seed_tot.metrics import BatchLog, BatchRecord, RunMetrics, summarize
from seed_tot.reasoning.chain_lines import LINE_DEPTH, ChainLines
from seed_tot.reasoning.evaluator import StateEvaluator, rejection
from seed_tot.reasoning.generator import ThoughtGenerator
from seed_tot.reasoning.move_chooser import MoveChooser, require_moves
from seed_tot.reasoning.prompting import PromptFormatter
from seed_tot.reasoning.random_moves import RandomMoves
from seed_tot.reasoning.request_seeds import request_seed, search_request
from seed_tot.requests import Executor, GenerationRequest
from seed_tot.search.answers import Selection, select_answer
from seed_tot.search.branching import plan_branches
from seed_tot.search.escalation import unsure
from seed_tot.search.known_states import first_goal, mark_repeats
from seed_tot.search.steps import Batch, BatchOutcome, Steps, drive, gather
from seed_tot.task import DEFAULT_THOUGHT_TOKENS, Problem, Task
from seed_tot.tree import ReasoningTree, ThoughtNode

ROOT_STATE = ""  # tasks keep the question in the problem; the state holds the thoughts so far


class SearchConfig(BaseModel):
    """Settings every search shares (defaults chosen for small open models: README, "How an answer is chosen").

    These defaults are the only place the numbers are written: the CLI's options and the run
    configuration (seed_tot/cli/run_config.py) read theirs from here."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    n_thoughts: int = Field(3, ge=1, description="thoughts generated per expanded state (n)")
    depth: int | None = Field(None, ge=1, description="step limit T; None uses the task's default depth")
    thought_decode: DecodeConfig = DecodeConfig(max_new_tokens=DEFAULT_THOUGHT_TOKENS, temperature=0.7, top_p=0.95)
    value_decode: DecodeConfig = DecodeConfig(max_new_tokens=128, temperature=0.7, top_p=0.95)
    value_samples: int = Field(3, ge=1, description="evaluator replies per state, averaged (k)")
    value_mode: Literal["samples", "logits", "learned", "constant"] = Field(
        "samples", description="samples: k sampled evaluator replies, parsed; logits: the verdict words' "
        "probabilities from one forward per state (tasks with verdict_values); learned: a value head on the "
        "target's hidden states (a LearnedJudge given to the search), which also rates the chains of thought; "
        "constant: every state no rule rejects is worth 0.5, no model call (a blind baseline)"
    )
    vote: bool = Field(True, description="majority vote over answer leaves, for tasks with comparable answers")
    vote_weight: Literal["leaf", "path", "value"] = Field(
        "leaf", description="leaf: one vote per answer node; path: the answer leaves of one parent state share "
        "one vote (each chain of thought is its own path); value: each answer node votes with its value "
        "(value mode learned, which rates every answer node)"
    )
    cot_candidate: bool = Field(
        True, description="one greedy chain-of-thought of the target joins the vote (ties go to it), "
        "for tasks with a cot_prompt"
    )
    cot_samples: int = Field(
        4, ge=0, description="sampled chains of thought (at the thought temperature and top_p) that join the "
        "vote beside the greedy one: independent paths, as in self-consistency; none when thoughts are greedy "
        "or there is no vote"
    )
    escalate_samples: int = Field(
        0, ge=0, description="sampled chains of thought drawn in a second round where the vote over the first is "
        "unsure (its winner holds less than escalate_below of the votes); 0: never"
    )
    escalate_below: float = Field(
        0.7, ge=0.0, le=1.0, description="the winning answer's share of the votes below which escalate_samples "
        "more chains are drawn (0.7 was chosen on GSM8K training problems for the learned judge's weighted vote)"
    )
    escalate_from: Literal["root", "chains"] = Field(
        "root", description="root: the second round's chains start afresh; chains: each continues the first half "
        "of the best-valued chain of the vote's leading answer or its runner-up (a tree that decodes only the rest)"
    )
    cot_decode: DecodeConfig = DecodeConfig(max_new_tokens=512, temperature=0.0)
    thought_mode: Literal["sample", "line", "choose", "random"] = Field(
        "sample", description="sample: n sampled thoughts per state; line: for tasks with a cot_prompt, a state is "
        "a partial chain of thought and a thought its next line (n sampled lines per state; with a learned judge, "
        "BFS is a value-guided beam over lines); choose: for tasks that list their moves "
        "(next_moves), the target's n most likely listed moves, read from one forward per point where they part; "
        "random: n of the listed moves drawn at random with a per-node seed, no model call (a blind baseline)"
    )
    known_states: bool = Field(
        True, description="for tasks that name their states (state_key, reaches_goal): prune thoughts that "
        "return to a state on their path or already in the tree, and stop at a state shown to reach the goal"
    )
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
        """The search of one problem as a step generator (yields batches, returns the result)."""
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
        cot_prompt = self.task.cot_prompt
        first_round = chain_indices(cfg)
        if cfg.cot_candidate and cot_prompt is not None:
            chosen_id, cot_results = yield from gather([self._search(run), self._cot(run, cot_prompt(problem), first_round)])
            self._add_chains(tree, problem, cot_results, first_round)
        else:
            chosen_id = yield from self._search(run)
        selection = select_answer(self.task, problem, tree, chosen_id, vote=cfg.vote, weight=cfg.vote_weight)
        second_round = escalation_indices(cfg, first_round)
        if second_round and cot_prompt is not None and self.task.votable and unsure(selection, cfg.escalate_below):
            sources, prefixes = (plan_branches(self.task, problem, tree, selection.votes, len(second_round))
                                 if cfg.escalate_from == "chains" else ([], []))
            if sources:
                yield from self._branch(run, cot_prompt(problem), second_round, sources, prefixes)
            else:  # afresh, as asked, or because no chain of the first round answered
                more = yield from self._cot(run, cot_prompt(problem), second_round)
                self._add_chains(tree, problem, more, second_round)
            selection = select_answer(self.task, problem, tree, chosen_id, vote=cfg.vote, weight=cfg.vote_weight)
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

    def _cot(self, run: SearchRun, prompt: str, indices: range) -> Steps[list]:
        """The chains of thought `indices` (0 greedy, then samples) of the whole problem, as one batch."""
        requests = cot_requests(self.formatter.encode(prompt), self.config, run.problem.id, indices)
        outcome = yield Batch("cot", 0, requests)
        run.log.add("cot", 0, outcome.results, outcome)
        return outcome.results

    def _add_chains(self, tree: ReasoningTree, problem: Problem, results: list, indices: range) -> None:
        chains = [add_cot_node(tree, self.task, problem, result, index, self.config.seed)
                  for index, result in zip(indices, results, strict=True)]
        if self.judge is not None:
            rate_chains(self.judge, self.task, problem, chains)

    def _branch(self, run: SearchRun, prompt: str, indices: range, sources: list[ThoughtNode],
                prefixes: list[str]) -> Steps[None]:
        """The second round as branches: chains `indices` continue `prefixes` of `sources`
        (seed_tot/search/branching.py), as one batch."""
        requests = branch_requests(self.formatter, prompt, self.config, run.problem.id, sources, prefixes, indices)
        outcome = yield Batch("cot", 0, requests)
        run.log.add("cot", 0, outcome.results, outcome)
        branches = [add_branch_node(run.tree, self.task, run.problem, result, index, source, prefix, request.seed)
                    for result, index, source, prefix, request
                    in zip(outcome.results, indices, sources, prefixes, requests, strict=True)]
        if self.judge is not None:
            rate_chains(self.judge, self.task, run.problem, branches)

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


def require_cot_prompt(task: Task, search_name: str) -> None:
    """Raise ConfigError when `task` has no chain-of-thought prompt for a search built on whole chains."""
    if task.cot_prompt is None:
        raise ConfigError(f"{search_name} needs a task with a chain-of-thought prompt; {task.name} has none: "
                          "use a tree search (bfs or mcts).")


def sampled_chains_run(config: SearchConfig) -> bool:
    # greedy thoughts would make every sample a copy of the greedy chain; without a vote they are unused
    return config.thought_decode.temperature > 0 and config.vote


def chain_indices(config: SearchConfig) -> range:
    """The first round's chains of thought: the greedy one (index 0), then `cot_samples` sampled ones."""
    return range(1 + (config.cot_samples if sampled_chains_run(config) else 0))


def escalation_indices(config: SearchConfig, first_round: range) -> range:
    """The sampled chains of the second round, drawn only where the first round's vote is unsure."""
    more = config.escalate_samples if sampled_chains_run(config) and config.cot_candidate else 0
    return range(first_round.stop, first_round.stop + more)


def sampled_cot_decode(config: SearchConfig) -> DecodeConfig:
    """A sampled chain's decoding: the chains' token budget at the thought temperature and top-p."""
    return config.cot_decode.model_copy(
        update={"temperature": config.thought_decode.temperature, "top_p": config.thought_decode.top_p}
    )


def cot_requests(prompt_ids: list[int], config: SearchConfig, problem_id: str,
                 indices: range | None = None) -> list[GenerationRequest]:
    """The chains of thought `indices` (default: the first round's): index 0 greedy, the others sampled
    at the thought temperature and top-p, each with its own seed (a chain is the same in either round)."""
    sampled = sampled_cot_decode(config)
    return [
        search_request(prompt_ids, sampled if index else config.cot_decode, config.seed, problem_id, 0, "cot", index)
        for index in (chain_indices(config) if indices is None else indices)
    ]


def branch_requests(formatter: PromptFormatter, prompt: str, config: SearchConfig, problem_id: str,
                    sources: list[ThoughtNode], prefixes: list[str], indices: range) -> list[GenerationRequest]:
    """Chains `indices` continuing `prefixes` of `sources` (the reply so far), sampled like the chains
    and seeded by the chain they continue; each decodes what is left of a whole chain's token budget."""
    sampled = sampled_cot_decode(config)
    prompt_length = len(formatter.encode(prompt))
    requests = []
    for source, prefix, index in zip(sources, prefixes, indices, strict=True):
        prompt_ids = formatter.encode(prompt, prefix)
        left = max(1, sampled.max_new_tokens - (len(prompt_ids) - prompt_length))
        decode = sampled.model_copy(update={"max_new_tokens": left})
        requests.append(search_request(prompt_ids, decode, config.seed, problem_id, source.id, "branch", index))
    return requests


def add_cot_node(
    tree: ReasoningTree, task: Task, problem: Problem, result, index: int, run_seed: int
) -> ThoughtNode:
    """Chain of thought `index` (0 greedy, then the samples) as a child of the root, never expanded
    or rated: the greedy one is marked info["cot"] (ties go to it), a sample info["cot_sample"]."""
    node = add_chain(tree, task, problem, result.text, result)
    if index == 0:
        node.info["cot"] = True
    else:
        node.info["cot_sample"] = index
    node.seeds["cot"] = request_seed(run_seed, problem.id, 0, "cot", index)
    return node


def add_branch_node(tree: ReasoningTree, task: Task, problem: Problem, result, index: int, source: ThoughtNode,
                    prefix: str, seed: int) -> ThoughtNode:
    """Chain `index` that continued the first `len(prefix)` characters of chain `source`, as a child
    of the root beside it (info["cot_branch"], info["branched_from"], info["prefix_chars"])."""
    node = add_chain(tree, task, problem, prefix + result.text, result)
    node.info.update({"cot_branch": index, "branched_from": source.id, "prefix_chars": len(prefix)})
    node.seeds["branch"] = seed
    return node


def add_chain(tree: ReasoningTree, task: Task, problem: Problem, text: str, result) -> ThoughtNode:
    """A whole chain of thought (`text`, generated as `result`) as an answer node under the root."""
    text = text.strip()
    node = tree.add_child(tree.root.id, thought=text, state=task.cot_state(text), kind="answer", generation=result.stats)
    node.info["finish_reason"] = result.finish_reason
    reason = rejection(task, problem, node)  # cut off, or shown wrong: it does not vote
    if reason is not None:
        node.info["rejected"] = reason
    return node


def rate_chains(judge, task: Task, problem: Problem, chains: list[ThoughtNode]) -> None:
    """Learned values for the chains of thought no rule rejected (no token decoded: one forward each)."""
    rated = [node for node in chains if "rejected" not in node.info]
    answers = [task.extract_answer(problem, node.state) for node in rated]
    for node, value in zip(rated, judge.values(task, problem, [node.state for node in rated], answers) if rated else [],
                           strict=True):
        node.value, node.value_parsed = value, True
        node.info["judge"] = judge.head_id


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
