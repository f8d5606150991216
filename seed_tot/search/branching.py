"""A second round that branches from the first round's chains instead of starting over.

Where the first round's vote is unsure, the new chains continue the opening lines of the chains
that carry the vote's two leading answers (the best-valued chain of each), so they share those
lines with them and decode only the rest: the chains grow into a tree. `--escalate-from chains`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from seed_tot.search.answers import is_chain_of_thought, vote_candidates
from seed_tot.task import Problem, Task
from seed_tot.tree import ReasoningTree, ThoughtNode, value_key


def branch_prefix(text: str, share: float = 0.5) -> str:
    """The opening of chain `text`: its first ceil(share * L) of L non-blank lines, with the line
    breaks that follow them (so the prompt ends on the token the model wrote after the line).
    Empty when the chain has fewer than two non-blank lines (its branch starts afresh)."""
    lines = text.splitlines(keepends=True)
    filled = [i for i, line in enumerate(lines) if line.strip()]
    if len(filled) < 2:
        return ""
    keep = min(len(filled) - 1, max(1, math.ceil(share * len(filled))))
    end = filled[keep]  # the first line not kept: everything before it, blank lines included
    return "".join(lines[:end])


def branch_sources(candidates: list[tuple[str, ThoughtNode]], votes: Mapping[str, float], count: int) -> list[ThoughtNode]:
    """The chain each of `count` branches continues: the best-valued chain of the leading answer and
    of the runner-up (by the vote's totals), taken in turn; one answer's chains alone when no other
    answer voted. Ties in the totals go to the answer whose best chain ranks first."""
    best: dict[str, ThoughtNode] = {}
    for answer, node in candidates:
        if answer in votes and (answer not in best or value_key(node) < value_key(best[answer])):
            best[answer] = node
    ranked = sorted(best, key=lambda answer: (-votes[answer], value_key(best[answer])))[:2]
    chosen = [best[answer] for answer in ranked]
    return [chosen[i % len(chosen)] for i in range(count)] if chosen else []


def plan_branches(task: Task, problem: Problem, tree: ReasoningTree, votes: Mapping[str, float],
                  count: int) -> tuple[list[ThoughtNode], list[str]]:
    """(the chains `count` branches continue, the opening each keeps) for `tree`'s chains of thought;
    none when no chain answered."""
    chains = [(answer, node) for answer, node in vote_candidates(task, problem, tree) if is_chain_of_thought(node)]
    sources = branch_sources(chains, votes, count)
    return sources, [branch_prefix(node.thought) for node in sources]
