"""Moved to seed_tot/tree.py (the tree types sit below search/, reasoning/ and observe/).

Kept only for seed_tot/search/answers.py's import until that file imports seed_tot.tree."""

from seed_tot.tree import ReasoningTree, ThoughtNode, value_key  # noqa: F401
