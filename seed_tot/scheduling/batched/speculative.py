"""Batched speculative decoding (SD, MCSD, n-gram lookup): each step drafts every row's token
tree, verifies all rows in ONE target forward and keeps what each row accepted."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch

from seed_tot.config import parse_k_config
from seed_tot.decoding.drafters import PromptLookupDrafter
from seed_tot.decoding.speculative import draft_children, next_draft_depth, tree_depth
from seed_tot.decoding.verify import DraftTree, verify_tree
from seed_tot.errors import ConfigError
from seed_tot.requests import GenerationRequest, GenerationResult
from seed_tot.runtime.ragged import RaggedBatchCache
from seed_tot.runtime.runner import ModelRunner
from seed_tot.scheduling.batched.prefill import chain_parents, prefill, score_joining
from seed_tot.scheduling.batched.rows import (
    Row, batch_probabilities, join_batch, leave_cancelled, leave_finished, make_prefix_cache, new_row, row_result, run_in_session,
)
from seed_tot.scheduling.session import DecodeSession, SessionWork


def draft_candidates(logits: torch.Tensor, q: torch.Tensor, count: int, row: Row) -> list[tuple[int, torch.Tensor]]:
    """`count` candidates after one draft position, as seed_tot.decoding.speculative.draft_children
    draws them (greedy: top distinct tokens with one-hot q; sampling: i.i.d. from q), with q given."""
    if row.temperature == 0.0:
        return draft_children(logits, count, 0.0, 1.0, row.generator)
    drawn = torch.multinomial(q, count, replacement=True, generator=row.generator).tolist()
    return [(int(token), q) for token in drawn]


@dataclass
class _Draft:
    """One row's token tree of this step and where its tokens sit in the draft cache's step."""

    tree: DraftTree = field(default_factory=DraftTree)
    todo_slots: list[int] = field(default_factory=list)  # step slots of the fed draft_todo tokens
    node_slot: dict[int, int] = field(default_factory=dict)  # fed tree node -> step slot


class BatchedSpeculativeExecutor:
    """Lossless speculative decoding of all requests together (SD when k_config is all ones, MCSD otherwise).

    drafter="model" drafts with the draft model; drafter="lookup" drafts a chain of up to
    len(k_config) tokens by n-gram lookup in the row's own context and the batch's other rows
    (no draft model). A lookup draft is deterministic given the contexts: its q is one-hot, so
    verify_tree (seed_tot/decoding/verify.py) draws ONE token y from the target per position and
    accepts the drafted token when it equals y, else emits y. That is the draw autoregressive
    sampling makes, so a sampled output is token-identical to AR sampling with the same seed
    (in float32; in reduced precision only the distribution is the target's), whatever was drafted.
    Sampled model drafts (q not one-hot) use verify.py's multi-candidate rule: exact in distribution.
    """

    def __init__(
        self,
        target: ModelRunner,
        draft: ModelRunner | None,
        k_config: tuple[int, ...] | str = (1, 1, 1, 1),
        adaptive_k: bool = False,
        max_k: int = 8,
        share_prefix: bool = True,
        compact_slack: int = 32,
        name: str = "batched-sd",
        drafter: str = "model",
        max_ngram: int = 3,
        min_ngram: int = 1,
        prefix_cache_mb: float = 1024,
        draft_slot_budget: int | None = None,
        max_kv_tokens: int | None = None,
    ):
        from seed_tot.models.loading import check_pair

        if drafter not in ("model", "lookup"):
            raise ConfigError(f"Unknown drafter {drafter!r}: use model or lookup.")
        if drafter == "model":
            if draft is None:
                raise ConfigError("The model drafter needs a draft model: pass one of the target's tokenizer family.")
            check_pair(draft, target)
        if draft_slot_budget is not None and (drafter != "lookup" or draft_slot_budget < 0):
            raise ConfigError(
                f"draft_slot_budget (got {draft_slot_budget}) needs the lookup drafter and a value >= 0: its "
                "one-hot drafts keep sampled outputs independent of draft lengths, a draft model's do not."
            )
        if not 1 <= min_ngram <= max_ngram:
            raise ConfigError(f"Lookup n-gram sizes need 1 <= min_ngram <= max_ngram, got {min_ngram} and {max_ngram}.")
        self.drafter = drafter
        self.draft_slot_budget = draft_slot_budget
        self.lookup = PromptLookupDrafter(target.vocab_size, max_ngram=max_ngram, min_ngram=min_ngram)
        self.target = target
        self.draft = draft if drafter == "model" else None
        self.k_config = parse_k_config(k_config)
        if drafter == "lookup" and set(self.k_config) != {1}:
            raise ConfigError(f"The lookup drafter proposes one chain: use k (k_config of ones), not {self.k_config}.")
        self.adaptive_k = adaptive_k
        self.max_k = max(max_k, len(self.k_config)) if adaptive_k else len(self.k_config)
        self.share_prefix = share_prefix
        self.prefix_cache = make_prefix_cache(prefix_cache_mb)
        self.draft_prefix_cache = make_prefix_cache(prefix_cache_mb) if self.draft is not None else None
        self.compact_slack = compact_slack
        self.max_kv_tokens = max_kv_tokens  # rows' KV tokens held at once (a memory budget); None: no bound
        self.name = name
        self.last_timing: dict[str, float] = {}
        self.work = SessionWork()

    def _shape(self, depth: int) -> tuple[int, ...]:
        """Candidates per level for a draft of `depth` levels (levels past k_config get one)."""
        return (self.k_config + (1,) * self.max_k)[:depth]

    def session(self) -> "_SpeculativeSession":
        """A batch that requests may join between steps (continuous batching)."""
        return _SpeculativeSession(self)

    def run(self, requests: list[GenerationRequest]) -> list[GenerationResult]:
        return run_in_session(self, requests)

    def _adapt(self, row: Row, drafted_depth: int, accepted: int) -> None:
        if self.adaptive_k:
            row.depth = next_draft_depth(row.depth, drafted_depth, accepted, self.max_k)

    def _draft_step(self, batch: RaggedBatchCache, rows: list[Row]) -> list[_Draft]:
        """Draft every row's token tree: one batched draft forward per tree level."""
        # As in the serial drafter: no deeper than the tokens the row may still emit.
        depths = [min(row.depth, row.sink.remaining) for row in rows]
        drafts = [_Draft() for _ in rows]
        if max(depths) <= 0:
            return drafts
        feed = [row.draft_todo if d > 0 else [] for row, d in zip(rows, depths)]
        logits = batch.forward(feed, [chain_parents(len(f)) for f in feed], logits_at=[max(len(f) - 1, 0) for f in feed])
        for row, draft, tokens in zip(rows, drafts, feed):
            draft.todo_slots = list(range(len(tokens)))
            row.stats.draft_forwards += 1 if tokens else 0
        # frontier per row: (tree node, its step slot, its logits, its q) of the nodes whose children come next
        q = batch_probabilities(logits, rows)
        frontier = [
            [(-1, len(f) - 1, logits[i, 0], q[i, 0])] if depths[i] > 0 else [] for i, f in enumerate(feed)
        ]
        for level in range(max(depths)):
            level_nodes: list[list[tuple[int, int]]] = []  # (node, parent step slot)
            for i, row in enumerate(rows):
                nodes = []
                if level < depths[i]:
                    count = self._shape(depths[i])[level]
                    for parent_node, parent_slot, node_logits, node_q in frontier[i]:
                        for token, token_q in draft_candidates(node_logits, node_q, count, row):
                            nodes.append((drafts[i].tree.add(token, parent_node, token_q), parent_slot))
                level_nodes.append(nodes)
            if level + 1 >= max(depths):
                break
            # Feed this level's nodes of the rows that draft deeper; the deepest level is never fed.
            base = batch.step_width
            tokens = [
                [drafts[i].tree.tokens[n] for n, _ in nodes] if level + 1 < depths[i] else []
                for i, nodes in enumerate(level_nodes)
            ]
            parents = [
                [slot for _, slot in nodes] if level + 1 < depths[i] else [] for i, nodes in enumerate(level_nodes)
            ]
            logits = batch.forward(tokens, parents)
            q = batch_probabilities(logits, rows)
            for i, row in enumerate(rows):
                frontier[i] = []
                if not tokens[i]:
                    continue
                row.stats.draft_forwards += 1
                for j, (node, _) in enumerate(level_nodes[i]):
                    drafts[i].node_slot[node] = base + j
                    frontier[i].append((node, base + j, logits[i, j], q[i, j]))
        return drafts

    def _lookup_step(self, active: list[Row], everyone: list[Row]) -> list[_Draft]:
        """Each active row's n-gram lookup chain (one-hot q), searched in the row itself and in the
        other rows of its request group (a problem's requests). Other groups are left out, so a
        row's drafts, and therefore its sampled tokens, do not depend on what else shares the
        batch (other problems, under --concurrency)."""
        drafts = []
        contexts = {id(row): row.request.prompt_ids + row.tokens for row in everyone}
        # A batch wider than the CPU's free width computes every drafted slot: share out the budget.
        cap = self.max_k if self.draft_slot_budget is None else self.draft_slot_budget // len(active)
        for row in active:
            others = [contexts[id(other)] for other in everyone
                      if other is not row and other.request.group == row.request.group]
            tree = self.lookup.draft(contexts[id(row)], min(row.depth, row.sink.remaining, cap), others)
            drafts.append(_Draft(tree=tree))
        return drafts

    def _target_step(self, batch: RaggedBatchCache, rows: list[Row], drafts: list[_Draft]) -> list[torch.Tensor]:
        """ONE batched target forward over [pending] + tree per row; each row's (1 + N, V) probabilities."""
        tokens = [[row.pending] + d.tree.tokens for row, d in zip(rows, drafts)]
        parents = [[-1] + [0 if p < 0 else 1 + p for p in d.tree.parents] for d in drafts]
        logits = batch.forward(tokens, parents)
        probs = batch_probabilities(logits, rows)
        return [probs[i, : len(t)] for i, t in enumerate(tokens)]

    def close(self) -> None:
        """Nothing to release: the executor holds no processes."""


class _SpeculativeSession(DecodeSession[Row]):
    """Batched speculative decoding: each step drafts every row, verifies all rows in ONE target
    forward and keeps what each row accepted."""

    def __init__(self, executor: BatchedSpeculativeExecutor):
        super().__init__(executor.work, executor.target, executor.max_kv_tokens)
        self.executor = executor
        self.target_batch: RaggedBatchCache | None = None
        self.draft_batch: RaggedBatchCache | None = None
        self.lookup_rows: list[Row] = []  # rows whose text lookup drafts may copy (groups still decoding)

    can_score = True

    def _join(self, queued: list[tuple[int, GenerationRequest]]) -> None:
        ex = self.executor
        started = time.perf_counter()
        self.scored, queued = score_joining(ex, queued)
        self.target_seconds += time.perf_counter() - started
        if not queued:
            return
        rows = [new_row(ticket, request, ex.target, depth=len(ex.k_config)) for ticket, request in queued]
        for row in rows:
            row.pending = row.request.prompt_ids[-1]
            row.draft_todo = [row.pending]
        heads = [r.prompt_ids[:-1] for _, r in queued]
        started = time.perf_counter()
        batch, _ = prefill(ex.target, heads, ex.share_prefix, prefix_cache=ex.prefix_cache)
        self.target_batch = join_batch(self.target_batch, batch, ex.compact_slack)
        drafted = time.perf_counter()
        if ex.draft is not None:
            batch, _ = prefill(ex.draft, heads, ex.share_prefix, prefix_cache=ex.draft_prefix_cache)
            self.draft_batch = join_batch(self.draft_batch, batch, ex.compact_slack)
        self.target_seconds += drafted - started
        self.draft_seconds += time.perf_counter() - drafted
        self.active += rows
        self.lookup_rows += rows

    def _remove(self, tickets: set[int]) -> None:
        self.active = leave_cancelled([self.target_batch, self.draft_batch], self.active, tickets)
        self.lookup_rows = [row for row in self.lookup_rows if row.ticket not in tickets]

    def _step(self) -> list[tuple[int, GenerationResult]]:
        ex, active = self.executor, self.active
        t0 = time.perf_counter()
        drafts = ex._draft_step(self.draft_batch, active) if self.draft_batch else ex._lookup_step(active, self.lookup_rows)
        t1 = time.perf_counter()
        target_probs = ex._target_step(self.target_batch, active, drafts)
        self.draft_seconds += t1 - t0
        self.target_seconds += time.perf_counter() - t1
        target_keep, draft_keep = [], []
        for row, draft, probs in zip(active, drafts, target_probs):
            # one-hot drafts (lookup, greedy): one draw from p per position, kept if it matches the
            # draft; sampled model drafts: accept with min(1, p/q), else try the residual (verify.py)
            verdict = verify_tree(draft.tree, probs, row.generator)
            target_keep.append([0] + [1 + node for node in verdict.accepted_nodes])
            fed = [draft.node_slot[n] for n in verdict.accepted_nodes if n in draft.node_slot]
            draft_keep.append(draft.todo_slots + fed)
            unfed = [t for n, t in zip(verdict.accepted_nodes, verdict.accepted_tokens) if n not in draft.node_slot]
            row.draft_todo = (row.draft_todo if not draft.todo_slots else []) + unfed + [verdict.next_token]
            row.pending = verdict.next_token
            drafted_depth = tree_depth(draft.tree)
            row.stats.draft_tokens_proposed += drafted_depth
            row.stats.draft_tokens_accepted += len(verdict.accepted_nodes)
            row.stats.target_forwards += 1
            ex._adapt(row, drafted_depth, len(verdict.accepted_nodes))
            row.sink.extend(verdict.accepted_tokens + [verdict.next_token])
        self.target_batch.commit(target_keep)
        if self.draft_batch:
            self.draft_batch.commit(draft_keep)
        self.active, ended = leave_finished([self.target_batch, self.draft_batch], active)
        decoding = {row.request.group for row in self.active}
        self.lookup_rows = [row for row in self.lookup_rows if not row.sink.finished or row.request.group in decoding]
        return [row_result(row, ex.target) for row in ended]
