"""Thought mode "choose": for a task that can list the moves a state allows, the target ranks
them instead of sampling thoughts, and the n most likely moves become the children.

The task lists the moves (`next_moves(problem, state, step)`, e.g. Blocksworld's legal actions
that do not return to a position the plan already passed through). A move's probability is the
probability that the target, answering the usual thought prompt but held to the listed moves
(constrained decoding), writes that move: the moves' tokens form a prefix tree, and at each point
where two moves part, one scoring request (`score_tokens`, the request the logit State Evaluator
uses) reads the next-token log-probabilities of the tokens that continue a listed move there,
renormalised over those tokens. A move's probability is the product over the points on its way.
No token is generated, every child is a move the task allows, and no two siblings are the same
move. A state with one move gets it with probability 1 and no request; a state with none gets no
child (a dead end).

Ties in probability go to the move listed first. The children record their move's probability.
(Asking the model for a letter among lettered moves was tried first and dropped: the 1.5B target
put the letter "A" on top at 14 of 14 states, whatever the move.)
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from seed_tot.config import DecodeConfig
from seed_tot.errors import ConfigError
from seed_tot.reasoning.generator import Thought
from seed_tot.reasoning.prompting import PromptFormatter
from seed_tot.reasoning.request_seeds import request_seed, search_request
from seed_tot.requests import GenerationRequest, GenerationResult, GenerationStats
from seed_tot.task import Problem, Task

if TYPE_CHECKING:  # a runtime import would cycle: seed_tot.search imports this module
    from seed_tot.tree import ThoughtNode

SCORE_ONLY = DecodeConfig(max_new_tokens=1, temperature=0.0)  # a scoring request generates nothing
Prefix = tuple[int, ...]


def require_moves(task: Task) -> None:
    """Raise ConfigError when `task` cannot list its moves (thought mode "choose" needs next_moves)."""
    if task.next_moves is None:
        raise ConfigError(f"Task {task.name} cannot list its moves (next_moves): use --thought-mode sample.")


def move_tokens(formatter: PromptFormatter, context: str, moves: list[str]) -> list[Prefix]:
    """Each move's token ids as the reply that follows `context` (the prompt text)."""
    base = formatter.encode_text(context)
    tokens = []
    for move in moves:
        ids = formatter.encode_text(context + move)
        if ids[: len(base)] != base or len(ids) == len(base):
            raise ConfigError(f"The move {move!r} does not tokenize apart from its prompt with this tokenizer: "
                              "use --thought-mode sample.")
        tokens.append(tuple(ids[len(base):]))
    for i, a in enumerate(tokens):
        for j, b in enumerate(tokens):
            if i != j and b[: len(a)] == a:
                raise ConfigError(f"The listed moves {moves[i]!r} and {moves[j]!r} are one the start of the other "
                                  "in tokens, so they cannot be told apart: use --thought-mode sample.")
    return tokens


def branch_points(tokens: list[Prefix]) -> dict[Prefix, tuple[int, ...]]:
    """The prefixes where two or more moves part, each with the distinct tokens that follow it."""
    following: dict[Prefix, set[int]] = {}
    for move in tokens:
        for cut in range(len(move)):
            following.setdefault(move[:cut], set()).add(move[cut])
    return {prefix: tuple(sorted(nexts)) for prefix, nexts in sorted(following.items()) if len(nexts) > 1}


def move_probabilities(tokens: list[Prefix], branches: dict[Prefix, tuple[int, ...]],
                       logprobs: dict[Prefix, list[float]]) -> list[float]:
    """Each move's probability under decoding held to the moves (renormalised at every branch point)."""
    choice: dict[Prefix, dict[int, float]] = {}
    for prefix, nexts in branches.items():
        top = max(logprobs[prefix])
        weights = [math.exp(lp - top) for lp in logprobs[prefix]]
        total = sum(weights)
        choice[prefix] = {token: weight / total for token, weight in zip(nexts, weights)}
    probabilities = []
    for move in tokens:
        p = 1.0
        for cut in range(len(move)):
            if move[:cut] in choice:
                p *= choice[move[:cut]][move[cut]]
        probabilities.append(p)
    return probabilities


class MoveChooser:
    """The Thought Generator of thought mode "choose" (same requests/read interface)."""

    def __init__(self, task: Task, formatter: PromptFormatter, n: int, run_seed: int, depth: int):
        """`depth`: the search's step limit, passed to the task's thought prompt and terminal check."""
        require_moves(task)
        self.task = task
        self.depth = depth
        self.formatter = formatter
        self.n = n
        self.run_seed = run_seed
        self._pending: dict[int, tuple[list[str], list[Prefix], dict[Prefix, tuple[int, ...]]]] = {}

    def requests(self, problem: Problem, node: ThoughtNode) -> list[GenerationRequest]:
        """One scoring request per point where the node's moves part; none for one move or none."""
        moves = list(self.task.next_moves(problem, node.state, node.depth))
        context = self.formatter.reply_context(self.task.thought_prompt(problem, node.state, node.depth, self.depth))
        tokens = move_tokens(self.formatter, context, moves)
        branches = branch_points(tokens)
        self._pending[node.id] = (moves, tokens, branches)
        prompt_ids = self.formatter.encode_text(context)
        requests = []
        for index, (prefix, nexts) in enumerate(branches.items()):
            request = search_request(prompt_ids + list(prefix), SCORE_ONLY, self.run_seed, problem.id, node.id,
                                     "thought", index)
            request.score_tokens = nexts
            requests.append(request)
        return requests

    def read(
        self, problem: Problem, node: ThoughtNode, requests: list[GenerationRequest], results: list[GenerationResult]
    ) -> list[Thought]:
        moves, tokens, branches = self._pending.pop(node.id)
        logprobs = {}
        for prefix, request, result in zip(branches, requests, results, strict=True):
            if result.candidate_logprobs is None:
                raise ConfigError(f"The executor returned no move log-probabilities for {request.request_id}: use "
                                  "--thought-mode sample, or a method that scores (batched-lookup, batched, ar).")
            logprobs[prefix] = list(result.candidate_logprobs)
        probabilities = move_probabilities(tokens, branches, logprobs)
        stats = GenerationStats()
        for result in results:
            stats = stats.merge(result.stats)
        order = sorted(range(len(moves)), key=lambda i: (-probabilities[i], i))[: self.n]
        seed = request_seed(self.run_seed, problem.id, node.id, "thought", 0)
        thoughts = []
        for rank, index in enumerate(order):
            state = self.task.extend_state(node.state, moves[index], node.depth)
            thoughts.append(Thought(
                text=moves[index],
                state=state,
                terminal=bool(self.task.is_terminal(problem, state, node.depth, self.depth)),
                seed=seed,
                finish_reason="stop",
                stats=stats if rank == 0 else GenerationStats(),  # the scoring forwards, once for all siblings
                move_probability=probabilities[index],
            ))
        return thoughts
