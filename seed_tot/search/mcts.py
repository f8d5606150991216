"""Monte-Carlo tree search over thoughts (UCT), shaped like llm-reasoners' MCTS.

One iteration: select a path by UCT down to a node that is not expanded yet, expand it (n
thoughts in one batch, their n evaluations in a second batch), then simulate by following the
best-valued child (expanding as needed) until an answer or the depth limit, and back the
rewards up the path. A node's reward is its evaluator value; the return credited to a node
is the mean reward from that node to the end of the path (the root gets the whole path).
"""

from __future__ import annotations

import math
from typing import Literal

from pydantic import Field

from seed_tot.search.base import Search, SearchRun, expand, is_dead_end
from seed_tot.search.known_states import is_pruned
from seed_tot.search.settings import SearchConfig
from seed_tot.search.steps import Steps
from seed_tot.tree import ThoughtNode, value_key


class MCTSConfig(SearchConfig):
    iterations: int = Field(10, ge=1)
    exploration_weight: float = Field(1.0, ge=0.0)
    output_strategy: Literal["max_reward", "most_visited"] = "max_reward"
    simulate: bool = Field(True, description="roll out greedily to an answer or the depth limit")


class MCTS(Search):
    name = "mcts"
    config_class = MCTSConfig
    config: MCTSConfig

    def _search(self, run: SearchRun) -> Steps[int]:
        root = run.tree.root
        for node in run.tree.nodes():
            node.info.update(visits=0, return_sum=0.0)
        for _ in range(self.config.iterations):
            path = self._select(run, root)
            leaf = path[-1]
            if self._expandable(run, leaf):
                yield from self._expand(run, leaf)
                if not is_dead_end(leaf):
                    path.append(self._best_child(run, leaf))
                    if self.config.simulate and run.solved is None:
                        yield from self._simulate(run, path)
            self._backpropagate(path)
            if run.solved is not None:  # a state shown at the goal ends the search (known_states)
                return run.solved
        if self.config.output_strategy == "most_visited":
            return self._most_visited_leaf(run, root).id
        return self._max_reward_node(run).id

    # -- the four phases ------------------------------------------------------------------

    def _select(self, run: SearchRun, node: ThoughtNode) -> list[ThoughtNode]:
        path = [node]
        while run.tree.children(node.id) and self._expandable(run, node, ignore_children=True):
            node = self._uct_child(run, node)
            path.append(node)
        return path

    def _expand(self, run: SearchRun, node: ThoughtNode) -> Steps[None]:
        for child in (yield from expand(run, [node.id])):
            child.info.update(visits=0, return_sum=0.0)

    def _simulate(self, run: SearchRun, path: list[ThoughtNode]) -> Steps[None]:
        node = path[-1]
        while self._expandable(run, node, ignore_children=True) and run.solved is None:
            if not run.tree.children(node.id):
                yield from self._expand(run, node)
                if is_dead_end(node):
                    break
            node = self._best_child(run, node)
            path.append(node)

    def _backpropagate(self, path: list[ThoughtNode]) -> None:
        rewards = [node.value if node.value is not None else 0.0 for node in path[1:]]
        for index, node in enumerate(path):
            suffix = rewards[max(index - 1, 0):]
            node.info["visits"] += 1
            node.info["return_sum"] += sum(suffix) / len(suffix) if suffix else 0.0

    # -- helpers --------------------------------------------------------------------------

    @staticmethod
    def _expandable(run: SearchRun, node: ThoughtNode, ignore_children: bool = False) -> bool:
        """Not an answer, a pruned repeat nor a dead end, above the depth limit and (unless ignored) without
        children yet."""
        if node.kind == "answer" or node.depth >= run.depth_limit or is_pruned(node) or is_dead_end(node):
            return False
        return ignore_children or not run.tree.children(node.id)

    @staticmethod
    def _q(node: ThoughtNode) -> float:
        return node.info["return_sum"] / node.info["visits"] if node.info["visits"] else 0.0

    def _uct_child(self, run: SearchRun, node: ThoughtNode) -> ThoughtNode:
        parent_visits = max(node.info["visits"], 1)

        def uct(child: ThoughtNode) -> float:
            if child.info["visits"] == 0:
                return math.inf
            explore = math.sqrt(math.log(parent_visits) / child.info["visits"])
            return self._q(child) + self.config.exploration_weight * explore

        best = None
        for child in run.tree.children(node.id):  # id order: ties go to the older child
            if best is None or uct(child) > uct(best):
                best = child
        return best

    @staticmethod
    def _best_child(run: SearchRun, node: ThoughtNode) -> ThoughtNode:
        return min(run.tree.children(node.id), key=value_key)

    def _most_visited_leaf(self, run: SearchRun, node: ThoughtNode) -> ThoughtNode:
        while True:
            visited = [c for c in run.tree.children(node.id) if c.info["visits"] > 0]
            if not visited:
                return node
            node = min(visited, key=lambda c: (-c.info["visits"], -self._q(c), c.id))

    @staticmethod
    def _max_reward_node(run: SearchRun) -> ThoughtNode:
        """The answer node (else the deepest nodes) whose path has the highest mean value."""
        rated = [node for node in run.tree.nodes() if node.value is not None]
        if not rated:
            return run.tree.root
        answers = [node for node in rated if node.kind == "answer"]
        deepest = max(node.depth for node in rated)
        candidates = answers or [node for node in rated if node.depth == deepest]

        def path_reward(node: ThoughtNode) -> float:
            values = [run.tree.node(i).value or 0.0 for i in run.tree.path_to(node.id)[1:]]
            return sum(values) / len(values)

        return min(candidates, key=lambda node: (-path_reward(node), node.id))
