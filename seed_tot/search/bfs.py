"""ToT-BFS (Algorithm 2 of the SEED paper): T steps, n thoughts per state, keep the b best states."""

from __future__ import annotations

from pydantic import Field

from seed_tot.search.base import Search, SearchRun, expand, is_dead_end
from seed_tot.search.known_states import is_pruned
from seed_tot.search.settings import SearchConfig
from seed_tot.search.steps import Steps
from seed_tot.tree import ThoughtNode, value_key


class BFSConfig(SearchConfig):
    breadth: int = Field(1, ge=1, description="states kept per step (b)")
    backtrack: bool = Field(
        True, description="when no kept state can go on (each is shown wrong, a pruned repeat or a dead end) and "
        "none holds an answer, go on from the best unexpanded states elsewhere in the tree"
    )


class BFS(Search):
    """Expand every kept state, rate the children, keep the `breadth` best; answer from the best.

    The kept states are expanded together: one batch of b*n thought requests per step.

    States that already hold an answer stay in the running without being expanded; the
    search stops early when every kept state holds an answer, or (known_states) as soon as a
    new state is shown to reach the goal. A pruned repeat is kept only when nothing else is
    left, and never expanded.

    With `backtrack`, a step that leaves no state to go on from (every kept state is rejected by
    a rule, a pruned repeat or a dead end, and none holds an answer) does not end the search: the
    next step expands the `breadth` best-valued states not yet expanded anywhere in the tree
    (marked info["backtracked"]). The search still takes at most T steps, so it never spends more
    than a tree that does not die.
    """

    name = "bfs"
    config_class = BFSConfig
    config: BFSConfig

    def _search(self, run: SearchRun) -> Steps[int]:
        frontier: list[ThoughtNode] = [run.tree.root]
        answer_from = frontier
        for step in range(run.depth_limit):
            open_states = [node for node in frontier if can_go_on(node)]
            if not open_states and self.config.backtrack and not any(holds_answer(node) for node in frontier):
                open_states = unexpanded_states(run, self.config.breadth)
                for node in open_states:
                    node.info["backtracked"] = True
            if not open_states:
                break
            candidates = [node for node in frontier if node.kind == "answer"]
            candidates.extend((yield from expand(run, [node.id for node in open_states])))
            live = [node for node in candidates if not is_pruned(node)]
            frontier = sorted(live or candidates, key=value_key)[: self.config.breadth]
            if run.solved is not None:  # shown at the goal: the search ends with it (an answer, never expanded)
                frontier = [run.tree.node(run.solved)]
            kept = {node.id for node in frontier}
            for node in candidates:
                node.info["bfs_step"] = step
                node.info["selected"] = node.id in kept
            answer_from = frontier or answer_from  # every expanded state a dead end: the last kept ones answer
        return min(answer_from, key=value_key).id


def can_go_on(node: ThoughtNode) -> bool:
    return node.kind != "answer" and not is_pruned(node) and not is_dead_end(node) and not node.info.get("goal")


def holds_answer(node: ThoughtNode) -> bool:
    return node.kind == "answer" and "rejected" not in node.info


def unexpanded_states(run: SearchRun, count: int) -> list[ThoughtNode]:
    """The `count` best-valued thought states of the tree that no rule rejected, not expanded yet and
    above the depth limit."""
    waiting = [node for node in run.tree.nodes()
               if node.kind == "thought" and "rejected" not in node.info and node.depth < run.depth_limit
               and not is_dead_end(node) and not run.tree.children(node.id)]
    return sorted(waiting, key=value_key)[:count]
