"""Lookahead decoding (Fu et al. 2023): exact decoding without a draft model.

Every step is ONE forward over a token tree rooted at the pending token x0 (the last accepted
token, not yet in the KV cache):

* lookahead branch: a 2-D window of N-1 levels x W tokens from past Jacobi iterations. Level 0
  is a causal chain x0 -> L0[0] -> L0[1] -> ...; the token at level l > 0, column i hangs under
  the token at level l-1, column i. So token (l, i) sees x0, L0[0..i] and its own diagonal chain
  L1[i] .. L(l-1)[i], and sits at position past + 1 + i + l. The greedy output at the top level,
  column i, is the next Jacobi value of that column; the column plus that output is a new
  n-gram (L0[i], L1[i], .., O[i]) for the pool.
* verification branch: up to G pool n-grams whose first token is x0, merged into a trie under
  x0 (each candidate is causal within itself, candidates sharing a prefix share its nodes).

The branches cannot see each other because they are different subtrees. The trie's n-grams are
one-hot proposals verified against the target (verify_guesses): greedy accepts the longest path
whose tokens equal the argmax before them, sampling draws one token per position and follows the
child it hits; plus one token after the path. The KV entries of every other node are dropped.
Output equals autoregressive decoding with the same seed, greedy or sampled.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from dataclasses import dataclass, field

import torch

from seed_tot.config import DecodeConfig
from seed_tot.decoding.jacobi import start_pending
from seed_tot.decoding.output import DecodeOutput
from seed_tot.decoding.speculative import check_prompt
from seed_tot.decoding.token_sink import TokenSink
from seed_tot.decoding.verify import verify_guesses
from seed_tot.errors import ConfigError
from seed_tot.requests import GenerationStats
from seed_tot.runtime import ModelRunner, cache_length, keep_positions, rollback
from seed_tot.runtime.masks import tree_attention_mask, tree_position_ids


@dataclass
class NGramPool:
    """n-grams keyed by their first token; each key keeps its `max_per_key` most recent continuations."""

    n: int
    max_per_key: int = 64
    table: dict[int, OrderedDict[tuple[int, ...], None]] = field(default_factory=dict)

    def add(self, first: int, continuation: tuple[int, ...]) -> None:
        entries = self.table.setdefault(first, OrderedDict())
        if continuation in entries:
            entries.move_to_end(continuation)
            return
        entries[continuation] = None
        if len(entries) > self.max_per_key:
            entries.popitem(last=False)

    def add_sequence(self, token_ids: list[int]) -> None:
        """Every n-gram of a token sequence (used to seed the pool from the prompt)."""
        for start in range(len(token_ids) - self.n + 1):
            self.add(token_ids[start], tuple(token_ids[start + 1 : start + self.n]))

    def candidates(self, first: int, limit: int) -> list[tuple[int, ...]]:
        """Up to `limit` continuations of `first`, most recently added first."""
        entries = self.table.get(first)
        if not entries or limit <= 0:
            return []
        return list(reversed(entries.keys()))[:limit]

    def __len__(self) -> int:
        return sum(len(entries) for entries in self.table.values())


def build_trie(candidates: list[tuple[int, ...]], max_depth: int) -> tuple[list[int], list[int]]:
    """Merge candidate continuations into a trie: (tokens, parents), parent -1 = under the root."""
    tokens: list[int] = []
    parents: list[int] = []
    children: dict[tuple[int, int], int] = {}
    for candidate in candidates:
        node = -1
        for token in candidate[:max_depth]:
            child = children.get((node, token))
            if child is None:
                child = len(tokens)
                tokens.append(token)
                parents.append(node)
                children[(node, token)] = child
            node = child
    return tokens, parents


def window_parents(levels: int, width: int) -> list[int]:
    """Parents of the lookahead window's nodes (level-major), indices in the step input (x0 = 0)."""
    parents = []
    for level in range(levels):
        for column in range(width):
            if level == 0:
                parents.append(column)  # x0 (index 0) for column 0, else the previous level-0 token
            else:
                parents.append(1 + (level - 1) * width + column)
    return parents


@dataclass
class LookaheadWindow:
    """The Jacobi trajectory: up to N-1 levels of W tokens; adding a level beyond N-1 drops the oldest."""

    width: int
    ngram: int
    levels: list[list[int]]

    def advance(self, outputs: list[int], pool: NGramPool) -> None:
        """Record the new top-level outputs; once full, every column yields an n-gram for the pool."""
        if len(self.levels) == self.ngram - 1:
            for column in range(self.width):
                chain = [level[column] for level in self.levels] + [outputs[column]]
                pool.add(chain[0], tuple(chain[1:]))
            self.levels = self.levels[1:]
        self.levels.append(outputs)


def initial_window(prompt_ids: list[int], width: int, ngram: int, seed: int) -> LookaheadWindow:
    """Level 0 is W tokens drawn from the prompt (seeded); the other levels fill during warm-up."""
    generator = torch.Generator().manual_seed(seed)
    picks = torch.randint(0, len(prompt_ids), (width,), generator=generator).tolist()
    return LookaheadWindow(width, ngram, [[prompt_ids[i] for i in picks]])


@dataclass
class LookaheadStep:
    accepted: list[int]  # the verified trie path + one more token
    matched: int  # how many of them came from the trie (guessed tokens that were correct)
    window_outputs: list[int]  # greedy outputs of the window's top level (next Jacobi values)


def lookahead_step(
    target: ModelRunner, cache, pending: int, levels: list[list[int]], trie_tokens: list[int], trie_parents: list[int],
    config: DecodeConfig, generator: torch.Generator,
) -> LookaheadStep:
    """ONE forward over x0 + window + trie; keep the cache of x0 and the accepted trie path only."""
    past = cache_length(cache)
    width = len(levels[0])
    trie_offset = 1 + len(levels) * width
    parents = [-1] + window_parents(len(levels), width) + [0 if p < 0 else trie_offset + p for p in trie_parents]
    input_ids = [pending] + [t for level in levels for t in level] + trie_tokens
    # Logits are needed only at x0, the window's top level and the trie (the LM head is costly).
    top_level = trie_offset - width
    needed = [0] + list(range(top_level, trie_offset)) + list(range(trie_offset, len(input_ids)))
    logits = target.forward(
        torch.tensor([input_ids], dtype=torch.long),
        cache,
        position_ids=tree_position_ids(parents, past),
        attention_mask=tree_attention_mask(parents, past, target.dtype),
        logits_to_keep=torch.tensor([needed], dtype=torch.long),
    )[0]
    # rows: x0, the W top-level nodes, the trie nodes
    verify_rows = torch.cat([logits[:1], logits[1 + width :]])
    verdict = verify_guesses(trie_tokens, trie_parents, verify_rows, config.temperature, config.top_p, generator)
    path = verdict.accepted_nodes
    if path:
        keep_positions(cache, past + 1, [past + trie_offset + j for j in path])
    else:
        rollback(cache, past + 1)
    return LookaheadStep(verdict.accepted_tokens + [verdict.next_token], len(path), logits[1 : 1 + width].argmax(-1).tolist())


def lookahead_decode(
    target: ModelRunner, prompt_ids: list[int], config: DecodeConfig, seed: int = 0,
    window: int = 5,
    ngram: int = 4,
    candidates: int | None = None,
    seed_pool_from_prompt: bool = True,
    pool_per_key: int = 64,
) -> DecodeOutput:
    """Lookahead decoding with window W=`window`, n-gram size N=`ngram`, G=`candidates` (default W).

    `seed` seeds the sampling (as in autoregressive decoding) and picks the prompt tokens that
    initialise the window; the window changes the speed, never the output.
    """
    prompt_ids = check_prompt(prompt_ids)
    max_candidates = window if candidates is None else candidates
    if window < 1 or ngram < 2 or max_candidates < 0:
        raise ConfigError(
            f"Bad lookahead settings W={window}, N={ngram}, G={max_candidates}: use W >= 1, N >= 2, G >= 0."
        )
    started, forwards_before = time.perf_counter(), target.forward_count
    stats = GenerationStats()
    sink = TokenSink.of(target, config)
    pool = NGramPool(ngram, pool_per_key)
    if seed_pool_from_prompt:
        pool.add_sequence(prompt_ids)
    lookahead = initial_window(prompt_ids, window, ngram, seed)
    generator = torch.Generator().manual_seed(seed)
    cache, pending = start_pending(target, prompt_ids)
    while True:
        # A step emits at most depth + 1 tokens: deeper candidates than the budget are wasted.
        trie_tokens, trie_parents = build_trie(pool.candidates(pending, max_candidates), max(0, sink.remaining - 1))
        step = lookahead_step(target, cache, pending, lookahead.levels, trie_tokens, trie_parents, config, generator)
        stats.draft_tokens_proposed += len(trie_tokens)
        stats.draft_tokens_accepted += step.matched
        lookahead.advance(step.window_outputs, pool)
        if sink.extend(step.accepted):
            break
        pending = step.accepted[-1]
    stats.new_tokens = len(sink.token_ids)
    stats.target_forwards = target.forward_count - forwards_before
    stats.wall_seconds = time.perf_counter() - started
    return DecodeOutput(sink.token_ids, sink.finish_reason, stats)
