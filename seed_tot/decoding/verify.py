"""Lossless verification of a drafted token tree (a chain is a tree with one child per node).

Multi-candidate rule (exact for the target distribution): at a node, try its children in
order; accept child x with probability min(1, p(x)/q(x)); on rejection replace p by
norm(max(0, p - q)) and try the next child; if every child is rejected (or there is none),
sample the next token from the current p. After an acceptance, continue at the child with
the target's distribution there. Greedy is the same rule with one-hot p (see sampling.py):
the child equal to the target argmax is accepted, otherwise the argmax is emitted.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from seed_tot.decoding.sampling import (
    accept_probability,
    one_hot,
    residual,
    sample,
    uniform,
)


@dataclass
class DraftTree:
    """Drafted tokens, parents listed before children; parent -1 = child of the pending token.

    `draft_probs[i]` is the draft distribution q that node i's token was drawn from (for
    siblings drawn i.i.d., the same tensor). Greedy drafts may pass a one-hot q.
    """

    tokens: list[int] = field(default_factory=list)
    parents: list[int] = field(default_factory=list)
    draft_probs: list[torch.Tensor] = field(default_factory=list)

    def add(self, token: int, parent: int, q: torch.Tensor) -> int:
        self.tokens.append(int(token))
        self.parents.append(int(parent))
        self.draft_probs.append(q)
        return len(self.tokens) - 1

    def children(self, node: int) -> list[int]:
        return [i for i, parent in enumerate(self.parents) if parent == node]

    def __len__(self) -> int:
        return len(self.tokens)


def chain_tree(tokens: list[int], vocab_size: int) -> DraftTree:
    """A draft chain of deterministic proposals (n-gram lookup): each token with a one-hot q."""
    tree = DraftTree()
    for position, token in enumerate(tokens):
        tree.add(token, position - 1, one_hot(token, vocab_size))
    return tree


@dataclass
class Verdict:
    accepted_nodes: list[int]  # tree node indices along the accepted path
    accepted_tokens: list[int]
    next_token: int  # resampled at the first rejection, or the bonus token after a full path


def verify_tree(tree: DraftTree, target_probs: torch.Tensor, generator: torch.Generator) -> Verdict:
    """Walk the tree with the multi-candidate rule.

    `target_probs` has 1 + len(tree) rows: row 0 is the target distribution after the pending
    token (for root children), row 1 + i the distribution after node i.
    """
    node, path = -1, []
    p = target_probs[0]
    while True:
        accepted_child = None
        for child in tree.children(node):
            q = tree.draft_probs[child]
            token = tree.tokens[child]
            if uniform(generator) < accept_probability(p, q, token):
                accepted_child = child
                break
            p = residual(p, q)
        if accepted_child is None:
            return Verdict(path, [tree.tokens[i] for i in path], sample(p, generator))
        path.append(accepted_child)
        node = accepted_child
        p = target_probs[1 + node]
