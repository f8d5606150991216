"""BiTA (Lin et al. 2024): a frozen model drafts with learnable prompt and mask tokens, and the
same forward verifies the previous step's drafts.

Every step is ONE forward of the frozen model over a token tree rooted at the pending token x0
(the last accepted token, not yet in the KV cache), on a cache that starts with the learnable
prefix (seed_tot.runtime.prefix):

* candidates: the previous step's drafts, the paper's tree: level m holds the top-k_m tokens of
  mask m (k_m = candidates - m, at least 1: the "upper triangle"), all children of level m-1's
  top-1 token, so only the top-1 chain is extended.
* mask groups: a chain of M mask tokens under x0 and under every candidate. Mask j of the group
  under a node at position p sits at p + 1 + j and drafts the token at p + 2 + j (the node's own
  logits give the token at p + 1). Only mask tokens see the prefix; x0 and the candidates see the
  sequence and their tree ancestors, exactly what the frozen model sees in plain decoding.

The candidates are one-hot proposals verified with verify_guesses: greedy accepts the longest
path whose tokens equal the argmax before them; sampling draws one token per emitted token and
follows the child it hits. So the output equals autoregressive decoding with the same seed,
greedy or sampled, whatever the prompt parameters are (training changes only the speed). The
next drafts come from the mask group of the last accepted node; every other position's cache
entry is dropped.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch

from seed_tot.config import DecodeConfig
from seed_tot.decoding.bita_params import BitaPrompt
from seed_tot.decoding.token_sink import TokenSink
from seed_tot.decoding.output import DecodeOutput
from seed_tot.decoding.speculative import check_prompt
from seed_tot.decoding.verify import verify_guesses
from seed_tot.errors import ConfigError
from seed_tot.requests import GenerationStats
from seed_tot.runtime import KVCache, ModelRunner, cache_length, keep_positions, rollback, tree_position_ids
from seed_tot.runtime.masks import prefixed_tree_mask
from seed_tot.runtime.prefix import prefixed_cache

DEFAULT_CANDIDATES = 5  # top-k at the first draft level (the paper's num_candidate)


@dataclass
class StepInput:
    """The tree of one step: x0 (index 0), the candidates, then one mask chain per node."""

    token_ids: list[int]  # x0 + candidates, then a placeholder id per mask slot
    parents: list[int]
    mask_slot: list[int]  # -1 for a real token, else which mask embedding (0..M-1)
    candidate_parents: list[int]  # the candidates' parents in verify_guesses' numbering (-1 = x0)
    group_start: list[int]  # per node (x0, then candidates): input index of its first mask


def candidate_tree(drafts: list[list[int]]) -> tuple[list[int], list[int]]:
    """(tokens, parents) of the paper's tree: level m's tokens hang under level m-1's first token."""
    tokens, parents = [], []
    anchor = -1
    for level in drafts:
        first = len(tokens)
        for token in level:
            tokens.append(int(token))
            parents.append(anchor)
        anchor = first
    return tokens, parents


def step_input(pending: int, drafts: list[list[int]], masks: int) -> StepInput:
    tokens, cand_parents = candidate_tree(drafts)
    ids = [pending] + tokens
    parents = [-1] + [p + 1 for p in cand_parents]  # input indices: x0 = 0, candidate i = 1 + i
    mask_slot = [-1] * len(ids)
    group_start = []
    for node in range(len(tokens) + 1):
        group_start.append(len(ids))
        for j in range(masks):
            parents.append(node if j == 0 else len(ids) - 1)
            ids.append(0)
            mask_slot.append(j)
    return StepInput(ids, parents, mask_slot, cand_parents, group_start)


def embed_step(target: ModelRunner, prompt: BitaPrompt, token_ids: list[int], mask_slot: list[int]) -> torch.Tensor:
    """Token embeddings, with each mask slot's row replaced by that mask token's embedding."""
    embeds = target.embed(torch.tensor([token_ids], dtype=torch.long)).clone()
    slots = torch.tensor(mask_slot)
    rows = (slots >= 0).nonzero().flatten()
    if rows.numel():
        table = prompt.mask_embeddings.detach().to(device=embeds.device, dtype=embeds.dtype)
        embeds[0, rows] = table[slots[rows]]
    return embeds


def next_drafts(target: ModelRunner, mask_hidden: torch.Tensor, candidates: int, levels: int) -> list[list[int]]:
    """Top-(candidates - m) tokens of mask m's logits (at least 1), for the first `levels` masks."""
    if levels <= 0:
        return []
    logits = target.logits(mask_hidden[:levels])
    return [logits[m].topk(max(1, candidates - m)).indices.tolist() for m in range(levels)]


@dataclass
class BitaState:
    cache: KVCache
    pending: int
    drafts: list[list[int]]


class BitaDecoder:
    """Holds the frozen target and the prompt parameters; `decode` runs one request."""

    def __init__(self, target: ModelRunner, prompt: BitaPrompt, candidates: int = DEFAULT_CANDIDATES,
                 depth: int | None = None):
        depth = prompt.masks if depth is None else depth
        if candidates < 1 or not 0 <= depth <= prompt.masks:
            raise ConfigError(f"Bad BiTA settings candidates={candidates}, depth={depth}: use candidates >= 1 "
                              f"and 0 <= depth <= {prompt.masks} (the checkpoint's mask tokens).")
        prompt.check_fits(target)
        self.target = target
        self.prompt = prompt
        self.candidates = candidates
        self.depth = depth
        self.prefix_kv = prompt.layer_kv(target.dtype, target.device)

    def _forward(self, cache: KVCache, ids: list[int], parents: list[int], mask_slot: list[int]) -> torch.Tensor:
        past = cache_length(cache) - self.prompt.prefix_len  # sequence positions before the tree
        mask = prefixed_tree_mask(parents, past, self.prompt.prefix_len, [s >= 0 for s in mask_slot], self.target.dtype)
        embeds = embed_step(self.target, self.prompt, ids, mask_slot)
        return self.target.hidden(embeds, cache, tree_position_ids(parents, past), mask)[0]

    def start(self, prompt_ids: list[int], config: DecodeConfig, generator: torch.Generator) -> tuple[BitaState, int]:
        """Prefill: the prompt as a chain plus one mask group under its last token. Returns the state
        (the cache holds prefix + prompt; the first new token is pending) and that first token."""
        cache = prefixed_cache(self.prefix_kv)
        n = len(prompt_ids)
        parents = list(range(-1, n - 1)) + list(range(n - 1, n - 1 + self.depth))
        slots = [-1] * n + list(range(self.depth))
        hidden = self._forward(cache, prompt_ids + [0] * self.depth, parents, slots)
        first = verify_guesses([], [], self.target.logits(hidden[n - 1 : n]), config.temperature, config.top_p, generator)
        rollback(cache, self.prompt.prefix_len + n)
        drafts = next_drafts(self.target, hidden[n:], self.candidates, self.depth)
        return BitaState(cache, first.next_token, drafts), first.next_token

    def step(self, state: BitaState, config: DecodeConfig, generator: torch.Generator, max_depth: int) -> tuple[list[int], int, int]:
        """One verify-and-draft forward. Returns (accepted tokens incl. the next pending one, candidates
        verified, candidates accepted) and updates `state` in place."""
        drafts = state.drafts[: max(0, max_depth)]
        step = step_input(state.pending, drafts, self.depth)
        past_with_prefix = cache_length(state.cache)
        hidden = self._forward(state.cache, step.token_ids, step.parents, step.mask_slot)
        n_candidates = len(step.candidate_parents)
        verify_logits = self.target.logits(hidden[: 1 + n_candidates])
        verdict = verify_guesses(step.token_ids[1 : 1 + n_candidates], step.candidate_parents, verify_logits,
                                 config.temperature, config.top_p, generator)
        path = verdict.accepted_nodes
        last = 0 if not path else 1 + path[-1]
        group = step.group_start[last]
        state.drafts = next_drafts(self.target, hidden[group : group + self.depth], self.candidates, self.depth)
        keep_positions(state.cache, past_with_prefix + 1, [past_with_prefix + 1 + node for node in path])
        state.pending = verdict.next_token
        return verdict.accepted_tokens + [verdict.next_token], n_candidates, len(path)

    def decode(self, prompt_ids: list[int], config: DecodeConfig, seed: int = 0) -> DecodeOutput:
        prompt_ids = check_prompt(prompt_ids)
        started, forwards_before = time.perf_counter(), self.target.forward_count
        stats = GenerationStats()
        sink = TokenSink.of(self.target, config)
        generator = torch.Generator().manual_seed(seed)
        state, first = self.start(prompt_ids, config, generator)
        finished = sink.extend([first])
        while not finished:
            accepted, proposed, matched = self.step(state, config, generator, sink.remaining - 1)
            stats.draft_tokens_proposed += proposed
            stats.draft_tokens_accepted += matched
            finished = sink.extend(accepted)
        stats.new_tokens = len(sink.token_ids)
        stats.target_forwards = self.target.forward_count - forwards_before
        stats.wall_seconds = time.perf_counter() - started
        return DecodeOutput(sink.token_ids, sink.finish_reason, stats)


def bita_decode(
    target: ModelRunner, prompt_ids: list[int], config: DecodeConfig, seed: int = 0,
    prompt: BitaPrompt | None = None,
    candidates: int = DEFAULT_CANDIDATES,
    depth: int | None = None,
) -> DecodeOutput:
    """BiTA decoding of one request with the prompt parameters `prompt` (see BitaDecoder)."""
    if prompt is None:
        raise ConfigError("BiTA needs its prompt parameters: load a checkpoint with "
                          "seed_tot.decoding.bita_params.load_prompt (or init_prompt for untrained ones).")
    return BitaDecoder(target, prompt, candidates, depth).decode(prompt_ids, config, seed)
