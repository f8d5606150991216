"""ToT-BFS (Algorithm 2 of the SEED paper): T steps, n thoughts per state, keep the b best states."""

from __future__ import annotations

from pydantic import Field

from seed_tot.search.base import Search, SearchConfig, SearchRun, expand
from seed_tot.search.known_states import is_pruned
from seed_tot.search.steps import Steps
from seed_tot.tree import ThoughtNode, value_key


class BFSConfig(SearchConfig):
    breadth: int = Field(1, ge=1, description="states kept per step (b)")


class BFS(Search):
    """Expand every kept state, rate the children, keep the `breadth` best; answer from the best.

    The kept states are expanded together: one batch of b*n thought requests per step.

    States that already hold an answer stay in the running without being expanded; the
    search stops early when every kept state holds an answer, or (known_states) as soon as a
    new state is shown to reach the goal. A pruned repeat is kept only when nothing else is
    left, and never expanded.
    """

    name = "bfs"
    config_class = BFSConfig
    config: BFSConfig

    def _search(self, run: SearchRun) -> Steps[int]:
        frontier: list[ThoughtNode] = [run.tree.root]
        for step in range(run.depth_limit):
            open_states = [node for node in frontier if node.kind != "answer" and not is_pruned(node) and not node.info.get("goal")]
            if not open_states:
                break
            candidates = [node for node in frontier if node.kind == "answer"]
            candidates.extend((yield from expand(run, [node.id for node in open_states])))
            if not candidates:  # every expanded state was a dead end: answer from the last kept states
                break
            live = [node for node in candidates if not is_pruned(node)]
            frontier = sorted(live or candidates, key=value_key)[: self.config.breadth]
            if run.solved is not None:  # shown at the goal: the search ends with it (an answer, never expanded)
                frontier = [run.tree.node(run.solved)]
            kept = {node.id for node in frontier}
            for node in candidates:
                node.info["bfs_step"] = step
                node.info["selected"] = node.id in kept
        return min(frontier, key=value_key).id
