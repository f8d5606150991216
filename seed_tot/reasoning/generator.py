"""Thought Generator: n requests with the same prompt (different seeds) per expanded state."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from seed_tot.config import DecodeConfig
from seed_tot.reasoning.prompting import PromptFormatter
from seed_tot.reasoning.request_seeds import search_request
from seed_tot.requests import (
    FinishReason,
    GenerationRequest,
    GenerationResult,
    GenerationStats,
)
from seed_tot.task import Problem, Task

if TYPE_CHECKING:  # a runtime import would cycle: seed_tot.search imports this module
    from seed_tot.tree import ThoughtNode


@dataclass
class Thought:
    text: str  # the generated thought, surrounding whitespace removed
    state: str  # the parent state extended by the thought
    terminal: bool  # the new state holds a final answer
    seed: int
    finish_reason: FinishReason
    stats: GenerationStats
    move_probability: float | None = None  # thought mode "choose": the move's probability among the listed ones


class ThoughtGenerator:
    def __init__(self, task: Task, formatter: PromptFormatter, decode: DecodeConfig, n: int, run_seed: int,
                 depth: int):
        """`depth`: the search's step limit, passed to the task's thought prompt and terminal check."""
        self.task = task
        self.depth = depth
        self.formatter = formatter
        # A task's stop strings end a thought where its next step would begin (GSM8K: a new
        # "Sub-question"), so one thought is one step and does not run into the budget.
        self.decode = decode.with_stop(task.thought_stop)
        self.n = n
        self.run_seed = run_seed

    def requests(self, problem: Problem, node: ThoughtNode) -> list[GenerationRequest]:
        """The n requests that expand `node`: one prompt, n seeds."""
        prompt_ids = self.formatter.encode(self.task.thought_prompt(problem, node.state, node.depth, self.depth))
        return thought_requests(prompt_ids, self.decode, self.run_seed, problem, node, self.n)

    def read(
        self, problem: Problem, node: ThoughtNode, requests: list[GenerationRequest], results: list[GenerationResult]
    ) -> list[Thought]:
        thoughts = []
        for request, result in zip(requests, results, strict=True):
            text = result.text.strip()
            state = self.task.extend_state(node.state, text, node.depth)
            thoughts.append(
                Thought(
                    text=text,
                    state=state,
                    terminal=bool(self.task.is_terminal(problem, state, node.depth, self.depth)),
                    seed=request.seed,
                    finish_reason=result.finish_reason,
                    stats=result.stats,
                )
            )
        return thoughts


def thought_requests(prompt_ids: list[int], decode: DecodeConfig, run_seed: int, problem: Problem, node: ThoughtNode,
                     n: int) -> list[GenerationRequest]:
    """n thought requests for `node` with one prompt, each with its own seed."""
    return [search_request(prompt_ids, decode, run_seed, problem.id, node.id, "thought", index) for index in range(n)]
