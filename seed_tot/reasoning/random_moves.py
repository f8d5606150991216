"""Thought mode "random": n of the moves a task lists, drawn uniformly at random, no model call.

The blind baseline of thought mode "choose" (seed_tot/reasoning/move_chooser.py): the same legal
moves (`next_moves`), but shuffled with a seed that depends only on the node's place in the tree
(`request_seed(run seed, problem, node, "thought", 0)`), so a run is repeatable and a different
run seed draws other moves. Paired with value mode "constant", a search sends no request at all,
and what it solves is the work of the search and the task's simulator alone.
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING

from seed_tot.reasoning.generator import Thought
from seed_tot.reasoning.move_chooser import require_moves
from seed_tot.reasoning.request_seeds import request_seed
from seed_tot.requests import GenerationRequest, GenerationResult, GenerationStats
from seed_tot.task import Problem, Task

if TYPE_CHECKING:  # a runtime import would cycle: seed_tot.search imports this module
    from seed_tot.tree import ThoughtNode


class RandomMoves:
    """The Thought Generator of thought mode "random" (the requests/read interface of MoveChooser)."""

    def __init__(self, task: Task, n: int, run_seed: int, depth: int):
        """`depth`: the search's step limit, passed to the task's terminal check."""
        require_moves(task)
        self.task = task
        self.depth = depth
        self.n = n
        self.run_seed = run_seed

    def requests(self, problem: Problem, node: ThoughtNode) -> list[GenerationRequest]:
        """None: the moves are drawn without the model."""
        return []

    def read(
        self, problem: Problem, node: ThoughtNode, requests: list[GenerationRequest], results: list[GenerationResult]
    ) -> list[Thought]:
        """n of the node's listed moves in a seeded random order (none at a dead end)."""
        moves = list(self.task.next_moves(problem, node.state, node.depth))
        seed = request_seed(self.run_seed, problem.id, node.id, "thought", 0)
        random.Random(seed).shuffle(moves)
        thoughts = []
        for move in moves[: self.n]:
            state = self.task.extend_state(node.state, move, node.depth)
            thoughts.append(Thought(
                text=move,
                state=state,
                terminal=bool(self.task.is_terminal(problem, state, node.depth, self.depth)),
                seed=seed,
                finish_reason="stop",
                stats=GenerationStats(),
                move_probability=1.0 / len(moves),
            ))
        return thoughts
