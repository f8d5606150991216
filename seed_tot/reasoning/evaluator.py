"""State Evaluator: k sampled replies per state (n states per expansion), aggregated as in ToT.

Before asking the model, a state is checked by rules that need no model: a thought cut off
by the token budget, or a step the task itself can show wrong (GSM8K arithmetic, an illegal
Blocksworld move), is *rejected*: it gets value 0.0 and no evaluator request is sent.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from seed_tot.config import DecodeConfig
from seed_tot.reasoning.prompting import PromptFormatter
from seed_tot.reasoning.seeds import search_request
from seed_tot.requests import GenerationRequest, GenerationResult, GenerationStats
from seed_tot.task import Problem, Task

if TYPE_CHECKING:  # a runtime import would cycle: seed_tot.search imports this module
    from seed_tot.tree import ThoughtNode

REJECTED_VALUE = 0.0


@dataclass
class Evaluation:
    value: float  # mean of the samples' values (unparseable samples count as the fallback)
    parsed: bool  # False when no sample could be parsed
    raw: list[str]  # the evaluator's replies, one per sample
    seeds: list[int]
    stats: GenerationStats
    rejected: str | None = None  # why a rule rejected the state (then no replies)
    sample_values: list[float | None] = field(default_factory=list)


def read_value(task: Task, text: str) -> tuple[float, bool]:
    """(value, parsed): the task's parse of `text`, or its fallback value when that fails."""
    value = task.parse_value(text)
    if value is None or not math.isfinite(float(value)):
        return float(task.fallback_value), False
    return float(value), True


def rejection(task: Task, problem: Problem, node: ThoughtNode) -> str | None:
    """Why `node` is rejected without asking the model, or None."""
    if node.info.get("finish_reason") == "length":
        return "truncated: the thought hit the token budget"
    check = getattr(task, "check_step", None)
    return check(problem, node.state) if check is not None else None


class StateEvaluator:
    def __init__(
        self, task: Task, formatter: PromptFormatter, decode: DecodeConfig, run_seed: int, samples: int = 1
    ):
        self.task = task
        self.formatter = formatter
        self.decode = decode.with_stop(getattr(task, "value_stop", ()))  # end the reply at its verdict
        self.run_seed = run_seed
        self.samples = 1 if self.decode.greedy else samples  # greedy replies would all be the same

    def requests(self, problem: Problem, nodes: list[ThoughtNode]) -> list[GenerationRequest]:
        """k requests per node that no rule rejects (the step is the parent's depth)."""
        requests = []
        for node in nodes:
            if rejection(self.task, problem, node) is not None:
                continue
            prompt_ids = self.formatter.encode(self.task.value_prompt(problem, node.state, node.depth - 1))
            requests.extend(
                search_request(prompt_ids, self.decode, self.run_seed, problem.id, node.id, "value", index)
                for index in range(self.samples)
            )
        return requests

    def read(
        self, problem: Problem, nodes: list[ThoughtNode], requests: list[GenerationRequest],
        results: list[GenerationResult],
    ) -> list[Evaluation]:
        """One Evaluation per node, from `requests(problem, nodes)` and their results."""
        answered = iter(zip(requests, results, strict=True))
        evaluations = []
        for node in nodes:
            reason = rejection(self.task, problem, node)
            if reason is not None:
                evaluations.append(
                    Evaluation(REJECTED_VALUE, True, [], [], GenerationStats(), rejected=reason)
                )
                continue
            replies = [next(answered) for _ in range(self.samples)]
            evaluations.append(self._aggregate(replies))
        return evaluations

    def _aggregate(self, replies: list[tuple[GenerationRequest, GenerationResult]]) -> Evaluation:
        values, parsed, stats = [], [], GenerationStats()
        for _, result in replies:
            value, ok = read_value(self.task, result.text)
            values.append(value)
            parsed.append(value if ok else None)
            stats = stats.merge(result.stats)
        return Evaluation(
            value=sum(values) / len(values),
            parsed=any(p is not None for p in parsed),
            raw=[result.text for _, result in replies],
            seeds=[request.seed for request, _ in replies],
            stats=stats,
            sample_values=parsed,
        )
