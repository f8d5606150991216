"""Drafters: anything that proposes a token tree and learns from the verification verdict.

The shape follows transformers' candidate generators (get_candidates /
update_candidate_strategy), so a draft model, an n-gram pool (prompt lookup) and lookahead
decoding share one lossless verify path (speculative.speculative_decode_with).

Losslessness needs only this: every drafted token is drawn from the q stored with it, and
q depends on nothing but the context. A deterministic proposal (prompt lookup, greedy
top-k) is a draw from a one-hot q, so verification keeps the target distribution exactly
for sampling too (tests/test_distribution.py checks it); it just accepts less often.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from seed_tot.config import DecodeConfig, parse_k_config
from seed_tot.decoding.output import DecodeOutput
from seed_tot.decoding.speculative import (
    commit_draft,
    draft_tree,
    speculative_decode_with,
)
from seed_tot.decoding.verify import DraftTree, Verdict, chain_tree
from seed_tot.errors import ConfigError
from seed_tot.runtime import ModelRunner, cache_length, rollback


def common_prefix_length(first: list[int], second: list[int]) -> int:
    n = 0
    for a, b in zip(first, second):
        if a != b:
            break
        n += 1
    return n


class DraftModelDrafter:
    """A small causal LM drafting k_config-shaped trees over its own KV cache.

    The drafter remembers which tokens its cache holds and, on each proposal, feeds only what
    is missing (the whole prompt the first time; later the pending token, plus the last
    accepted token when a full path was accepted, because the last tree level is not fed).
    """

    def __init__(
        self,
        draft: ModelRunner,
        k_config: tuple[int, ...],
        temperature: float,
        top_p: float,
        generator: torch.Generator,
    ):
        self.draft = draft
        self.k_config = tuple(k_config)
        self.temperature = temperature
        self.top_p = top_p
        self.generator = generator
        self.cache = draft.new_cache()
        self.cached_tokens: list[int] = []
        self.forwards = 0
        self._round: tuple[list[int], DraftTree] | None = None

    def propose(self, context_ids: list[int], pending: int, max_depth: int) -> DraftTree:
        k_config = self.k_config[: max(max_depth, 0)]
        if not k_config:
            self._round = None
            return DraftTree()
        keep = common_prefix_length(self.cached_tokens, context_ids)
        rollback(self.cache, keep)
        sequence = list(context_ids) + [int(pending)]
        tree, forwards = draft_tree(
            self.draft,
            self.cache,
            sequence[keep:],
            k_config,
            self.temperature,
            self.top_p,
            self.generator,
            fill_last_level=False,
        )
        self.forwards += forwards
        self._round = (sequence, tree)
        return tree

    def observe(self, verdict: Verdict) -> None:
        if self._round is None:
            return
        sequence, tree = self._round
        commit_draft(self.cache, len(sequence) - 1, tree, verdict.accepted_nodes)
        self.cached_tokens = (sequence + verdict.accepted_tokens)[: cache_length(self.cache)]
        self._round = None


class PromptLookupDrafter:
    """Prompt lookup: continue the longest recent n-gram match found earlier in the context.

    Proposes a chain of up to `num_tokens` tokens that followed the most recent earlier
    occurrence of the context's last n tokens (n from max_ngram down to min_ngram).
    """

    def __init__(self, vocab_size: int, num_tokens: int = 5, max_ngram: int = 3, min_ngram: int = 1):
        if num_tokens < 1 or min_ngram < 1 or max_ngram < min_ngram:
            raise ValueError("need num_tokens >= 1 and 1 <= min_ngram <= max_ngram")
        self.vocab_size = vocab_size
        self.num_tokens = num_tokens
        self.max_ngram = max_ngram
        self.min_ngram = min_ngram
        self.forwards = 0

    def propose(self, context_ids: list[int], pending: int, max_depth: int) -> DraftTree:
        return self.draft(list(context_ids) + [int(pending)], min(self.num_tokens, max_depth))

    def draft(self, sequence: list[int], length: int, others: Sequence[list[int]] = ()) -> DraftTree:
        """The one-hot chain draft of up to `length` tokens for `sequence` (searched in it, then in
        `others`); the batched lookup executor calls this once per row with its group's rows."""
        continuation = lookup_continuation(sequence, length, self.max_ngram, self.min_ngram, others)
        return chain_tree(continuation, self.vocab_size)

    def observe(self, verdict: Verdict) -> None:
        return None


def lookup_continuation(
    sequence: list[int], length: int, max_ngram: int, min_ngram: int, others: Sequence[list[int]] = ()
) -> list[int]:
    """Up to `length` tokens after the most recent earlier occurrence of the sequence's last n
    tokens (n from max_ngram down to min_ngram), searched in the sequence itself, then in
    `others` (a batch's other sequences: same-prompt samples often repeat each other)."""
    if length <= 0:
        return []
    for n in range(min(max_ngram, len(sequence) - 1), min_ngram - 1, -1):
        suffix = sequence[-n:]
        for source, last_start in [(sequence, len(sequence) - n - 1)] + [(o, len(o) - n - 1) for o in others]:
            for start in range(last_start, -1, -1):
                if source[start : start + n] == suffix:
                    return source[start + n : start + n + length]
    return []


def speculative_decode(
    draft: ModelRunner,
    target: ModelRunner,
    prompt_ids: Sequence[int],
    config: DecodeConfig,
    k_config: tuple[int, ...] | str = (1, 1, 1),
    seed: int = 0,
) -> DecodeOutput:
    """SD (k_config=(1,)*k) or MCSD (token trees such as (2,2,1)) with a draft model; lossless."""
    if draft.vocab_size != target.vocab_size:
        raise ConfigError(
            f"Draft model {draft.name!r} has {draft.vocab_size} logits and target {target.name!r} "
            f"{target.vocab_size}: use a draft/target pair with one vocabulary."
        )
    generator = torch.Generator().manual_seed(seed)
    drafter = DraftModelDrafter(draft, parse_k_config(k_config), config.temperature, config.top_p, generator)
    return speculative_decode_with(drafter, target, prompt_ids, config, generator=generator)
