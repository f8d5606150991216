"""Thought mode "choose": for a task that can list the moves a state allows, the target ranks
them instead of sampling thoughts, and the n most likely moves become the children.

The task lists the moves (`next_moves(problem, state, step)`, e.g. Blocksworld's legal actions
that do not return to a position the plan already passed through) and words a prompt that shows
them under letters (`move_prompt(problem, state, step, options)`, options being lines "A. move").
The reply starts with the task's `move_prefix` ("Answer:"), and one forward reads the next-token
log-probabilities of the letters (" A", " B", ...; the same `score_tokens` request the logit
State Evaluator uses). No token is generated, so every child is a move the task allows and no
two siblings are the same move. A state with no move gets no child (a dead end).

Ties in probability go to the move listed first. The children record their move's probability
(renormalised over the listed moves) and its rank.
"""

from __future__ import annotations

import math
import string
from typing import TYPE_CHECKING

from seed_tot.config import DecodeConfig
from seed_tot.errors import ConfigError
from seed_tot.reasoning.generator import Thought
from seed_tot.reasoning.prompting import PromptFormatter
from seed_tot.reasoning.request_seeds import search_request
from seed_tot.requests import GenerationRequest, GenerationResult, GenerationStats
from seed_tot.task import Problem, Task

if TYPE_CHECKING:  # a runtime import would cycle: seed_tot.search imports this module
    from seed_tot.tree import ThoughtNode

LABELS = string.ascii_uppercase
SCORE_ONLY = DecodeConfig(max_new_tokens=1, temperature=0.0)  # a scoring request generates nothing


def can_choose_moves(task: Task) -> bool:
    return all(hasattr(task, name) for name in ("next_moves", "move_prompt", "move_prefix"))


def lettered(moves: list[str]) -> str:
    """The moves as prompt lines "A. move", "B. move", ..."""
    return "\n".join(f"{label}. {move}" for label, move in zip(LABELS, moves))


def label_tokens(formatter: PromptFormatter, prefix: str) -> tuple[int, ...]:
    """The token id of each letter as the reply's next token after `prefix`: the letter after a
    space (" A", as BPE tokenizers write an answer), else the bare letter (a byte tokenizer)."""
    context = formatter.reply_context("?", prefix)
    base = formatter.encode_text(context)
    for joiner in (" ", ""):
        tokens = []
        for label in LABELS:
            ids = formatter.encode_text(context + joiner + label)
            if ids[: len(base)] != base or len(ids) != len(base) + 1:
                break
            tokens.append(ids[-1])
        if len(tokens) == len(LABELS) and len(set(tokens)) == len(tokens):
            return tuple(tokens)
    raise ConfigError(f"The move letters A-Z are not one distinct token each after {prefix!r} with this tokenizer: "
                      "use --thought-mode sample.")


def ranked(logprobs: list[float]) -> list[tuple[int, float]]:
    """(move index, probability renormalised over the moves), most likely first, ties to the lower index."""
    top = max(logprobs)
    weights = [math.exp(lp - top) for lp in logprobs]
    total = sum(weights)
    return sorted(((i, w / total) for i, w in enumerate(weights)), key=lambda pair: (-pair[1], pair[0]))


class MoveChooser:
    """The Thought Generator of thought mode "choose" (same requests/read interface)."""

    def __init__(self, task: Task, formatter: PromptFormatter, n: int, run_seed: int):
        if not can_choose_moves(task):
            raise ConfigError(f"Task {task.name} cannot list its moves (next_moves, move_prompt, move_prefix): "
                              "use --thought-mode sample.")
        self.task = task
        self.formatter = formatter
        self.n = n
        self.run_seed = run_seed
        self._tokens: tuple[int, ...] | None = None
        self._moves: dict[int, list[str]] = {}  # node id -> its listed moves, between requests and read

    def tokens(self) -> tuple[int, ...]:
        if self._tokens is None:
            self._tokens = label_tokens(self.formatter, self.task.move_prefix)
        return self._tokens

    def requests(self, problem: Problem, node: ThoughtNode) -> list[GenerationRequest]:
        """One scoring request over the letters of the node's moves; none when it has no move."""
        moves = list(self.task.next_moves(problem, node.state, node.depth))
        if len(moves) > len(LABELS):
            raise ConfigError(f"{len(moves)} moves are listed for one state; at most {len(LABELS)} can be lettered: "
                              "use --thought-mode sample.")
        self._moves[node.id] = moves
        if not moves:
            return []
        prompt = self.task.move_prompt(problem, node.state, node.depth, lettered(moves))
        request = search_request(self.formatter.encode(prompt, self.task.move_prefix), SCORE_ONLY, self.run_seed,
                                 problem.id, node.id, "thought", 0)
        request.score_tokens = self.tokens()[: len(moves)]
        return [request]

    def read(
        self, problem: Problem, node: ThoughtNode, requests: list[GenerationRequest], results: list[GenerationResult]
    ) -> list[Thought]:
        moves = self._moves.pop(node.id)
        if not requests:
            return []
        (request,), (result,) = requests, results
        if result.candidate_logprobs is None:
            raise ConfigError(f"The executor returned no move log-probabilities for {request.request_id}: use "
                              "--thought-mode sample, or a method that scores (batched-lookup, batched, ar).")
        thoughts = []
        for rank, (index, probability) in enumerate(ranked(list(result.candidate_logprobs))[: self.n]):
            state = self.task.extend_state(node.state, moves[index], node.depth)
            thoughts.append(Thought(
                text=moves[index],
                state=state,
                terminal=bool(self.task.is_terminal(problem, state, node.depth)),
                seed=request.seed,
                finish_reason="stop",
                stats=result.stats if rank == 0 else GenerationStats(),  # one forward for all siblings
                move_probability=probability,
            ))
        return thoughts
