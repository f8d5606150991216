"""Tree searches over thoughts. Add a search by writing a `Search` subclass in its own module
and listing it in SEARCHES; nothing else changes."""

from __future__ import annotations

from seed_tot.errors import ConfigError
from seed_tot.search.base import Search, SearchResult, expand
from seed_tot.search.best_of_n import BestOfN
from seed_tot.search.bfs import BFS, BFSConfig
from seed_tot.search.mcts import MCTS, MCTSConfig
from seed_tot.search.self_consistency import SelfConsistency
from seed_tot.search.settings import SearchConfig
from seed_tot.tree import ReasoningTree, ThoughtNode

SEARCHES: dict[str, type[Search]] = {cls.name: cls for cls in (BFS, MCTS, BestOfN, SelfConsistency)}


def search_class(name: str) -> type[Search]:
    if name not in SEARCHES:
        raise ConfigError(f"Unknown search {name!r}: choose one of {', '.join(sorted(SEARCHES))}.")
    return SEARCHES[name]


__all__ = [
    "BFS",
    "BestOfN",
    "BFSConfig",
    "MCTS",
    "MCTSConfig",
    "SEARCHES",
    "ReasoningTree",
    "Search",
    "SearchConfig",
    "SearchResult",
    "SelfConsistency",
    "ThoughtNode",
    "expand",
    "search_class",
]
