"""Lossless verification of a drafted token tree (a chain is a tree with one child per node).

Multi-candidate rule (exact for the target distribution): at a node, try its children in
order; accept child x with probability min(1, p(x)/q(x)); on rejection replace p by
norm(max(0, p - q)) and try the next child; if every child is rejected (or there is none),
sample the next token from the current p. After an acceptance, continue at the child with
the target's distribution there. Greedy is the same rule with one-hot p (see sampling.py):
the child equal to the target argmax is accepted, otherwise the argmax is emitted.

When every child of a node is a deterministic proposal (one-hot q: n-gram lookup, lookahead,
greedy drafts), the node draws ONE token y from p and follows the child whose token is y, or
emits y when none is. That is the same distribution as the rule above (child x is taken with
probability p(x), and a rejection leaves p without the proposed tokens), and it draws exactly
what autoregressive sampling draws: one sample per emitted token from the same generator. So
with such drafts a sampled output is token-identical to autoregressive sampling with the same
seed, whatever was drafted (so draft lengths may adapt to the batch without changing outputs).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from seed_tot.decoding.sampling import (
    accept_probability,
    one_hot,
    probabilities,
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
        children = tree.children(node)
        if all(is_deterministic(tree, child) for child in children):
            drawn = sample(p, generator)
            accepted_child = next((child for child in children if tree.tokens[child] == drawn), None)
        else:
            accepted_child, drawn = _try_children(tree, children, p, generator)
        if accepted_child is None:
            return Verdict(path, [tree.tokens[i] for i in path], drawn)
        path.append(accepted_child)
        node = accepted_child
        p = target_probs[1 + node]


def is_deterministic(tree: DraftTree, node: int) -> bool:
    """Whether the node's token was proposed with certainty (its q is one-hot)."""
    return float(tree.draft_probs[node][tree.tokens[node]]) == 1.0


def _try_children(
    tree: DraftTree, children: list[int], p: torch.Tensor, generator: torch.Generator
) -> tuple[int | None, int]:
    """The accept/residual rule over sampled proposals: (accepted child, -1) or (None, token from the residual)."""
    for child in children:
        q = tree.draft_probs[child]
        if uniform(generator) < accept_probability(p, q, tree.tokens[child]):
            return child, -1
        p = residual(p, q)
    return None, sample(p, generator)


def verify_guesses(
    tokens: list[int], parents: list[int], logits: torch.Tensor, temperature: float, top_p: float,
    generator: torch.Generator,
) -> Verdict:
    """Guessed tokens (a tree of one-hot proposals: n-grams, Jacobi guesses) against the target's
    logits, row 0 after the pending token and row 1 + i after guess i. Greedy follows the argmax
    and draws nothing, as autoregressive greedy decoding does; sampling draws one token per
    emitted token (verify_tree's deterministic rule), so either output equals autoregressive
    decoding with the same seed."""
    if temperature == 0.0:
        best = logits.argmax(-1).tolist()
        node, path = -1, []
        while (child := next((c for c, p in enumerate(parents) if p == node and tokens[c] == best[1 + node]), None)) is not None:
            path.append(child)
            node = child
        return Verdict(path, [tokens[i] for i in path], best[1 + node])
    tree = DraftTree()
    for token, parent in zip(tokens, parents, strict=True):
        tree.add(token, parent, one_hot(token, logits.shape[-1]))
    return verify_tree(tree, probabilities(logits, temperature, top_p), generator)
