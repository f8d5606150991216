"""Choosing a search's answer: a majority vote over its answer leaves (self-consistency).

Candidates are the tree's answer nodes that no rule rejected (a thought cut off by the token
budget or shown wrong by the task never counts), the chains of thought included when the search
ran them (the greedy one, info["cot"], and the sampled ones, info["cot_sample"]). The answer
with the most votes wins; a tie goes to the greedy CoT's answer when that chain voted (a chain
that was rejected or cut off neither votes nor breaks ties), then to the tied answer whose best
node has the highest value (then the lowest id).
`weight` says what one vote is: "leaf" (every answer node one vote, the default), "path" (one
vote per distinct path: the answer leaves that share a parent state split its one vote, so n
siblings of one expanded state count as one independent path, as each chain of thought does) or
"value" (each answer node votes with its value: a learned judge's probability that it is right).
Without `vote`, or for tasks whose answers are not comparable (`votable` False, e.g. Creative
Writing passages), the node the search chose gives the answer.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

from seed_tot.tree import ReasoningTree, ThoughtNode, value_key
from seed_tot.task import Problem, Task

VOTE_WEIGHTS = ("leaf", "path", "value")


@dataclass
class Selection:
    answer: str | None
    node_id: int  # the node whose path is reported as the chosen path
    method: str  # "vote", "search", or "goal" (the search's choice is shown at the goal: no vote)
    votes: dict[str, int] = field(default_factory=dict)
    cot_answer: str | None = None
    search_answer: str | None = None  # what the search's own choice answered
    search_node_id: int | None = None  # the search's own choice

    def as_dict(self) -> dict:
        return asdict(self)


def is_chain_of_thought(node: ThoughtNode) -> bool:
    """A chain of thought of the whole problem (greedy, sampled, or a branch of one), not a state the search built."""
    return marks_chain(node.info)


def marks_chain(info: dict) -> bool:
    """True for a node's info that marks a chain of thought (also read from stored traces)."""
    return bool(info.get("cot") or info.get("cot_sample") or info.get("cot_branch"))


def vote_candidates(task: Task, problem: Problem, tree: ReasoningTree) -> list[tuple[str, ThoughtNode]]:
    """(answer, node) for every answer node that counts in the vote."""
    found = []
    for node in tree.nodes():
        if node.kind != "answer" or "rejected" in node.info or node.info.get("finish_reason") == "length":
            continue
        answer = task.extract_answer(problem, node.state)
        if answer is not None:
            found.append((answer, node))
    return found


def vote_weights(candidates: list[tuple[str, ThoughtNode]], weight: str) -> list[float]:
    """The weight of each candidate's vote (see the module docstring); chains are each their own path."""
    if weight == "leaf":
        return [1.0] * len(candidates)
    if weight == "value":  # a node without a value (never rated) does not vote
        return [node.value if node.value is not None else 0.0 for _, node in candidates]
    if weight != "path":
        raise ValueError(f"Unknown vote weight {weight!r}: use one of {', '.join(VOTE_WEIGHTS)}.")
    siblings: Counter = Counter(node.parent for _, node in candidates if not is_chain_of_thought(node))
    return [1.0 if is_chain_of_thought(node) else 1.0 / siblings[node.parent] for _, node in candidates]


def select_answer(
    task: Task,
    problem: Problem,
    tree: ReasoningTree,
    chosen_id: int,
    vote: bool,
    keep: Callable[[ThoughtNode], bool] = lambda node: True,
    weight: str = "leaf",
) -> Selection:
    """The answer of the tree; only the nodes for which keep(node) holds take part in the vote
    (reports use it to ask what the chains of thought, or the tree, would have voted alone)."""
    chosen = tree.node(chosen_id)
    search_answer = task.extract_answer(problem, chosen.state)
    cot = next((node for node in tree.nodes() if node.info.get("cot") and keep(node)), None)
    cot_answer = task.extract_answer(problem, cot.state) if cot is not None else None
    if chosen.info.get("goal") and keep(chosen):  # the task showed this plan solves the problem: no vote can beat it
        return Selection(search_answer, chosen_id, "goal", cot_answer=cot_answer, search_answer=search_answer,
                         search_node_id=chosen_id)
    votable = vote and task.votable
    candidates = [(a, node) for a, node in vote_candidates(task, problem, tree) if keep(node)] if votable else []
    if not candidates:
        return Selection(search_answer, chosen_id, "search", cot_answer=cot_answer, search_answer=search_answer,
                         search_node_id=chosen_id)
    votes: dict[str, float] = defaultdict(float)
    for (answer, _), share in zip(candidates, vote_weights(candidates, weight), strict=True):
        votes[answer] += share
    top = max(votes.values())
    tied = {answer for answer, count in votes.items() if abs(count - top) < 1e-9}
    best_nodes = {}
    for answer, node in candidates:
        if answer in tied and (answer not in best_nodes or value_key(node) < value_key(best_nodes[answer])):
            best_nodes[answer] = node
    cot_voted = cot is not None and any(node is cot for _, node in candidates)
    if cot_voted and cot_answer in tied:
        winner = cot_answer
    else:
        winner = min(tied, key=lambda answer: value_key(best_nodes[answer]))
    return Selection(
        winner, best_nodes[winner].id, "vote", votes={a: int(v) if v == int(v) else round(v, 4) for a, v in votes.items()}, cot_answer=cot_answer, search_answer=search_answer,
        search_node_id=chosen_id,
    )
