"""Speculative decoding with token-tree drafts: SD is k_config=(1,)*k, MCSD any other shape.

A round, as small composable functions (the SEED scheduler calls them one by one):

    tree, n = draft_tree(draft, draft_cache, pending, k_config, T, top_p, gen)   # draft model
    probs = target_probs_for_tree(target, target_cache, pending, tree, T, top_p) # 1 forward
    verdict = verify_tree(tree, probs, gen)                                      # verify.py
    commit_target(target_cache, prefix_len, tree, verdict.accepted_nodes)
    commit_draft(draft_cache, prefix_len, tree, verdict.accepted_nodes)

Cache contract: before a round both caches hold every accepted token except the newest one,
`pending` (prefix_len = the number of tokens before it). The round feeds `pending` and the
tree; a commit keeps [0, prefix_len) + pending + the accepted path. The round emits the
accepted tokens plus `verdict.next_token`, which becomes the next pending token.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Protocol

import torch

from seed_tot.config import DecodeConfig
from seed_tot.decoding.output import DecodeOutput
from seed_tot.decoding.sampling import one_hot, probabilities
from seed_tot.decoding.token_sink import TokenSink
from seed_tot.decoding.verify import DraftTree, Verdict, verify_tree
from seed_tot.errors import SeedTotError
from seed_tot.requests import GenerationStats
from seed_tot.runtime import KVCache, ModelRunner, cache_length, keep_positions, rollback
from seed_tot.runtime.masks import tree_attention_mask, tree_depths, tree_position_ids


class Drafter(Protocol):
    """Proposes a token tree after `context_ids + [pending]`; `forwards` counts its model forwards."""

    forwards: int

    def propose(self, context_ids: list[int], pending: int, max_depth: int) -> DraftTree: ...

    def observe(self, verdict: Verdict) -> None: ...


def draft_children(
    logits: torch.Tensor, k: int, temperature: float, top_p: float, generator: torch.Generator
) -> list[tuple[int, torch.Tensor]]:
    """k candidate tokens after one draft position, each with the distribution q it came from.

    Sampling: k i.i.d. draws from q (the multi-candidate rule in verify.py needs i.i.d.).
    Greedy: the top-k distinct tokens, each with a one-hot q (a deterministic proposal).
    """
    if temperature == 0.0:
        top = logits.topk(min(k, logits.shape[-1])).indices.tolist()
        return [(token, one_hot(token, logits.shape[-1])) for token in top]
    q = probabilities(logits, temperature, top_p)
    drawn = torch.multinomial(q, k, replacement=True, generator=generator).tolist()
    return [(token, q) for token in drawn]


def draft_tree(
    draft: ModelRunner,
    cache: KVCache,
    pending: int | Sequence[int],
    k_config: tuple[int, ...],
    temperature: float,
    top_p: float,
    generator: torch.Generator,
    fill_last_level: bool = True,
) -> tuple[DraftTree, int]:
    """Draft a token tree level by level, one draft forward per level; return (tree, forwards).

    The cache holds every accepted token except `pending`. `pending` may also be a list of
    tokens the cache lacks (the last one is the pending token; e.g. a whole prompt). Level j
    gives each node of level j-1 k_config[j] children. With `fill_last_level` the last level
    is fed too, so the cache ends holding pending + every tree node; without it (one forward
    fewer) the last level's nodes are missing and commit_draft keeps only what is there.
    """
    feed = [int(pending)] if isinstance(pending, int) else [int(t) for t in pending]
    if not feed:
        raise ValueError("draft_tree needs at least one pending token")
    logits = draft.forward(torch.tensor([feed]), cache, logits_to_keep=1)[0, -1]
    forwards = 1
    past_len = cache_length(cache)
    tree = DraftTree()
    frontier: list[tuple[int, torch.Tensor]] = [(-1, logits)]
    for level, k in enumerate(k_config):
        start = len(tree)
        for node, node_logits in frontier:
            for token, q in draft_children(node_logits, k, temperature, top_p, generator):
                tree.add(token, node, q)
        last = level == len(k_config) - 1
        if last and not fill_last_level:
            break
        level_logits = draft.forward(
            torch.tensor([tree.tokens[start:]]),
            cache,
            position_ids=tree_position_ids(tree.parents, past_len, start),
            attention_mask=tree_attention_mask(tree.parents, past_len, draft.dtype, start),
            logits_to_keep=1 if last else 0,
        )[0]
        forwards += 1
        if last:
            break
        frontier = [(start + i, level_logits[i]) for i in range(len(tree) - start)]
    return tree, forwards


def target_probs_for_tree(
    target: ModelRunner,
    cache: KVCache,
    pending: int,
    tree: DraftTree,
    temperature: float,
    top_p: float,
) -> torch.Tensor:
    """One target forward over [pending] + tree nodes; (1 + len(tree), V) target probabilities."""
    past_len = cache_length(cache)
    parents = [-1] + [parent + 1 for parent in tree.parents]
    logits = target.forward(
        torch.tensor([[int(pending)] + tree.tokens]),
        cache,
        position_ids=tree_position_ids(parents, past_len),
        attention_mask=tree_attention_mask(parents, past_len, target.dtype),
    )[0]
    return probabilities(logits, temperature, top_p)


def _keep_path(cache: KVCache, prefix_len: int, accepted_nodes: list[int]) -> None:
    """Keep [0, prefix_len] (pending included) + the accepted nodes present in the cache."""
    present = cache_length(cache)
    kept = [prefix_len] + [prefix_len + 1 + node for node in accepted_nodes if prefix_len + 1 + node < present]
    if kept == list(range(prefix_len, prefix_len + len(kept))):
        rollback(cache, prefix_len + len(kept))  # a chain prefix: a crop is enough
    else:
        keep_positions(cache, prefix_len, kept)


def commit_draft(cache: KVCache, prefix_len: int, tree: DraftTree, accepted_nodes: list[int]) -> None:
    """Keep positions [0, prefix_len) + pending + the accepted path's nodes the cache holds."""
    _keep_path(cache, prefix_len, accepted_nodes)


def commit_target(cache: KVCache, prefix_len: int, tree: DraftTree, accepted_nodes: list[int]) -> None:
    """Keep positions [0, prefix_len) + pending + the accepted path's nodes."""
    expected = prefix_len + 1 + len(tree)
    if cache_length(cache) != expected:
        raise ValueError(f"target cache holds {cache_length(cache)} positions, expected {expected}")
    _keep_path(cache, prefix_len, accepted_nodes)


def tree_depth(tree: DraftTree) -> int:
    """Number of drafted positions (levels) of the tree: the most tokens a round can accept."""
    return max(tree_depths(tree.parents)) + 1 if len(tree) else 0


def next_draft_depth(depth: int, drafted: int, accepted: int, max_depth: int) -> int:
    """Adaptive k: one level deeper after a fully accepted draft, one shallower after a first-level
    rejection. Depends only on past verdicts, so output stays lossless."""
    if drafted == 0:
        return depth
    if accepted >= drafted:
        return min(depth + 1, max_depth)
    if accepted == 0:
        return max(depth - 1, 1)
    return depth


def check_prompt(prompt_ids: Sequence[int]) -> list[int]:
    if len(prompt_ids) == 0:
        raise SeedTotError("The prompt is empty: give at least one prompt token.")
    return [int(t) for t in prompt_ids]


def speculative_decode_with(
    drafter: "Drafter",
    target: ModelRunner,
    prompt_ids: Sequence[int],
    config: DecodeConfig,
    seed: int = 0,
    generator: torch.Generator | None = None,
) -> DecodeOutput:
    """Decode with any drafter (draft model, prompt lookup, ...) and lossless tree verification.

    `generator` (default: seeded with `seed`) drives verification; pass the drafter's own
    generator to keep one random stream per request.
    """
    started = time.perf_counter()
    prompt = check_prompt(prompt_ids)
    generator = generator if generator is not None else torch.Generator().manual_seed(seed)
    sink = TokenSink.of(target, config)
    stats = GenerationStats()
    forwards_before, draft_forwards_before = target.forward_count, drafter.forwards

    cache = target.new_cache()
    context, pending = prompt[:-1], prompt[-1]
    if context:
        target.forward(torch.tensor([context]), cache, logits_to_keep=1)
    while True:
        # A round emits accepted tokens + one more; deeper drafts than the remaining budget are wasted.
        tree = drafter.propose(context, pending, max_depth=sink.remaining)
        probs = target_probs_for_tree(target, cache, pending, tree, config.temperature, config.top_p)
        verdict = verify_tree(tree, probs, generator)
        commit_target(cache, len(context), tree, verdict.accepted_nodes)
        drafter.observe(verdict)
        stats.draft_tokens_proposed += tree_depth(tree)
        stats.draft_tokens_accepted += len(verdict.accepted_tokens)

        context = context + [pending] + verdict.accepted_tokens
        pending = verdict.next_token
        if sink.extend(verdict.accepted_tokens + [verdict.next_token]):
            break

    stats.new_tokens = len(sink.token_ids)
    stats.target_forwards = target.forward_count - forwards_before
    stats.draft_forwards = drafter.forwards - draft_forwards_before
    stats.wall_seconds = time.perf_counter() - started
    return DecodeOutput(sink.token_ids, sink.finish_reason, stats)


__all__ = [
    "Verdict",
    "commit_draft",
    "commit_target",
    "draft_children",
    "draft_tree",
    "next_draft_depth",
    "Drafter",
    "speculative_decode_with",
    "target_probs_for_tree",
    "tree_depth",
]
