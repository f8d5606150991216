"""The reasoning tree: states connected by thoughts, stored on a networkx DiGraph.

Node ids are integers handed out in creation order, so a deterministic search builds the
same tree (same ids) every time. Each graph node carries one `ThoughtNode` under the
attribute "node"; edges point from parent to child.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator, Literal

import networkx as nx

from seed_tot.requests import GenerationStats

NodeKind = Literal["root", "thought", "answer"]


@dataclass
class ThoughtNode:
    id: int
    parent: int | None
    depth: int
    kind: NodeKind
    state: str  # the full state text (root: the question's initial state)
    thought: str = ""  # the generated thought that led here from the parent
    value: float | None = None  # the State Evaluator's value (fallback value when unparseable)
    raw_values: list[str] = field(default_factory=list)  # the evaluator's raw replies
    value_parsed: bool | None = None  # False when the fallback value was used
    generation: GenerationStats | None = None  # stats of the request that wrote `thought`
    evaluation: GenerationStats | None = None  # stats of the request that rated `state`
    seeds: dict[str, int] = field(default_factory=dict)  # role ("thought"/"value") -> request seed
    info: dict = field(default_factory=dict)  # search-specific data (e.g. MCTS visits)


class ReasoningTree:
    """A rooted tree of ThoughtNodes."""

    def __init__(self) -> None:
        self.graph = nx.DiGraph()
        self._next_id = 0

    # -- building -------------------------------------------------------------------------

    def add_root(self, state: str) -> ThoughtNode:
        if self.graph.number_of_nodes():
            raise ValueError("the tree already has a root")
        return self._add(ThoughtNode(id=self._take_id(), parent=None, depth=0, kind="root", state=state))

    def add_child(
        self,
        parent: int,
        thought: str,
        state: str,
        kind: NodeKind = "thought",
        generation: GenerationStats | None = None,
    ) -> ThoughtNode:
        parent_node = self.node(parent)
        node = ThoughtNode(
            id=self._take_id(),
            parent=parent,
            depth=parent_node.depth + 1,
            kind=kind,
            state=state,
            thought=thought,
            generation=generation,
        )
        self._add(node)
        self.graph.add_edge(parent, node.id)
        return node

    def insert(self, node: ThoughtNode) -> None:
        """Add a fully formed node (used when loading a trace); its parent must exist."""
        if node.parent is not None and node.parent not in self.graph:
            raise ValueError(f"parent {node.parent} of node {node.id} is not in the tree")
        self._add(node)
        if node.parent is not None:
            self.graph.add_edge(node.parent, node.id)
        self._next_id = max(self._next_id, node.id + 1)

    def _take_id(self) -> int:
        node_id = self._next_id
        self._next_id += 1
        return node_id

    def _add(self, node: ThoughtNode) -> ThoughtNode:
        self.graph.add_node(node.id, node=node)
        return node

    # -- reading --------------------------------------------------------------------------

    @property
    def root(self) -> ThoughtNode:
        return self.node(0) if 0 in self.graph else self._find_root()

    def _find_root(self) -> ThoughtNode:
        for node in self.nodes():
            if node.parent is None:
                return node
        raise ValueError("the tree is empty")

    def node(self, node_id: int) -> ThoughtNode:
        return self.graph.nodes[node_id]["node"]

    def nodes(self) -> Iterator[ThoughtNode]:
        """All nodes in id order."""
        for node_id in sorted(self.graph.nodes):
            yield self.node(node_id)

    def children(self, node_id: int) -> list[ThoughtNode]:
        return [self.node(child) for child in sorted(self.graph.successors(node_id))]

    def edges(self) -> list[tuple[int, int]]:
        return sorted(self.graph.edges)

    def path_to(self, node_id: int) -> list[int]:
        """Node ids from the root down to `node_id`."""
        path = [node_id]
        while (parent := self.node(path[-1]).parent) is not None:
            path.append(parent)
        return path[::-1]

    def leaves(self) -> list[ThoughtNode]:
        return [node for node in self.nodes() if self.graph.out_degree(node.id) == 0]

    def __len__(self) -> int:
        return self.graph.number_of_nodes()


def value_key(node: ThoughtNode) -> tuple[bool, float, int]:
    """Sort key: states no rule rejected first, then higher value, then lower id (ties break
    the same way every run)."""
    return ("rejected" in node.info, -(node.value if node.value is not None else float("-inf")), node.id)
