"""State Evaluator: one request per state (n different prompts per expansion)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from seed_tot.config import DecodeConfig
from seed_tot.reasoning.prompting import PromptFormatter
from seed_tot.reasoning.seeds import request_seed
from seed_tot.scheduling.requests import GenerationRequest, GenerationResult, GenerationStats
from tasks.base import Problem, Task

if TYPE_CHECKING:  # a runtime import would cycle: seed_tot.search imports this module
    from seed_tot.search.tree import ThoughtNode


@dataclass
class Evaluation:
    value: float  # the parsed value, or the task's fallback value
    parsed: bool  # False when the reply could not be parsed
    raw: str
    seed: int
    stats: GenerationStats


def read_value(task: Task, text: str) -> tuple[float, bool]:
    """(value, parsed): the task's parse of `text`, or its fallback value when that fails."""
    value = task.parse_value(text)
    if value is None or not math.isfinite(float(value)):
        return float(task.fallback_value), False
    return float(value), True


class StateEvaluator:
    def __init__(self, task: Task, formatter: PromptFormatter, decode: DecodeConfig, run_seed: int):
        self.task = task
        self.formatter = formatter
        self.decode = decode
        self.run_seed = run_seed

    def requests(self, problem: Problem, nodes: list[ThoughtNode]) -> list[GenerationRequest]:
        """One request per node; the step is the one that produced the node (parent depth)."""
        return [
            GenerationRequest(
                prompt_ids=self.formatter.encode(self.task.value_prompt(problem, node.state, node.depth - 1)),
                config=self.decode,
                seed=request_seed(self.run_seed, problem.id, node.id, "value", 0),
                request_id=f"{problem.id}/n{node.id}/value",
            )
            for node in nodes
        ]

    def read(self, requests: list[GenerationRequest], results: list[GenerationResult]) -> list[Evaluation]:
        evaluations = []
        for request, result in zip(requests, results, strict=True):
            value, parsed = read_value(self.task, result.text)
            evaluations.append(
                Evaluation(value=value, parsed=parsed, raw=result.text, seed=request.seed, stats=result.stats)
            )
        return evaluations
