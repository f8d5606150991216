"""Search that knows where it has been, for tasks that can name their states.

A task may offer two optional methods (seed_tot/task.py):
- `state_key(problem, state)`: a hashable name of the world state a state text reaches (None:
  no name, e.g. an unreadable plan). Two state texts with the same key are the same position.
- `reaches_goal(problem, state)`: True when the task can show that the state solves the problem
  (Blocksworld's simulator: the plan reaches the goal).

With them, every expansion (`mark_new_children`, called by seed_tot.search.base.expand):
- prunes a new thought whose key equals the key of a state on its own path (a loop: it undoes
  moves) or of a state already in the tree (merged into that earlier node, which keeps the
  search's work): the node is rejected with the reason and the node it repeats
  (info["repeats"]), gets no evaluator request and is never expanded;
- among new thoughts with one key, the first (lowest id) is kept;
- marks a new state that reaches the goal (info["goal"]) and records the first such node in
  `SearchRun.solved`; the searches then stop and answer from it.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import TYPE_CHECKING

from seed_tot.search.answers import marks_chain
from seed_tot.task import Problem, Task

if TYPE_CHECKING:
    from seed_tot.tree import ReasoningTree, ThoughtNode


def _key(task: Task, problem: Problem, node: ThoughtNode) -> Hashable | None:
    if "rejected" in node.info or marks_chain(node.info):
        return None
    return task.state_key(problem, node.state)


def mark_repeats(task: Task, problem: Problem, tree: ReasoningTree, children: list[ThoughtNode]) -> None:
    """Reject each child that repeats a state on its path or elsewhere in the tree (see the module)."""
    if task.state_key is None:
        return
    new = {child.id for child in children}
    first: dict[Hashable, int] = {}  # key -> the earliest node of the tree (before these children) with it
    for node in tree.nodes():
        if node.id not in new and "repeats" not in node.info:
            key = _key(task, problem, node)
            if key is not None:
                first.setdefault(key, node.id)
    for child in children:  # id order: an earlier sibling wins
        key = _key(task, problem, child)
        if key is None:
            continue
        on_path = next((i for i in tree.path_to(child.id)[:-1] if _key(task, problem, tree.node(i)) == key), None)
        if on_path is not None:
            child.info["repeats"] = on_path
            child.info["rejected"] = f"returns to the state of node {on_path} on its path"
        elif key in first:
            child.info["repeats"] = first[key]
            child.info["rejected"] = f"reaches the state of node {first[key]}, already in the tree"
        else:
            first[key] = child.id


def first_goal(task: Task, problem: Problem, children: list[ThoughtNode]) -> int | None:
    """Mark the children the task shows at the goal; the id of the first, or None."""
    if task.reaches_goal is None:
        return None
    solved = None
    for child in children:
        if "rejected" not in child.info and task.reaches_goal(problem, child.state):
            child.info["goal"] = True
            solved = child.id if solved is None else solved
    return solved


def is_pruned(node: ThoughtNode) -> bool:
    return "repeats" in node.info
