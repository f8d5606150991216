"""In-process batched executors: every request of a tree expansion advances in one batch.

BatchedARExecutor: one target forward per token for all rows together.
BatchedSpeculativeExecutor: lossless speculative decoding batched across the rows. A step
runs one batched draft forward per tree level and ONE batched target forward that verifies
every row's token tree; each row keeps what verify_tree accepted. Rows accept different
numbers of tokens, so both models keep a RaggedBatchCache (seed_tot/runtime/ragged.py):
rejected slots stay in the cache, masked out, and are never copied or rolled back.

Both executors share the prefill of identical prompts and of long common prompt prefixes and give each request
its own generator seeded with the request's seed, used in the same order as the serial
decoders (seed_tot/decoding/), so the tokens chosen for a row never depend on the other rows.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch

from seed_tot.config import parse_k_config
from seed_tot.decoding.drafters import PromptLookupDrafter
from seed_tot.decoding.output import StopCriteria
from seed_tot.decoding.sampling import probabilities, sample
from seed_tot.decoding.speculative import (
    draft_children,
    next_draft_depth,
    stop_criteria,
    tree_depth,
)
from seed_tot.decoding.verify import DraftTree, verify_tree
from seed_tot.errors import ConfigError
from seed_tot.requests import (
    FinishReason,
    GenerationRequest,
    GenerationResult,
    GenerationStats,
)
from seed_tot.runtime.ragged import RaggedBatchCache
from seed_tot.runtime.runner import ModelRunner
from seed_tot.scheduling.buckets import length_buckets
from seed_tot.scheduling.prefix_cache import PrefixCache, PrefixMatch
from seed_tot.scheduling.prefix_plan import plan_cost, plan_prefix_sharing, stage_cost
from seed_tot.scheduling.scoring import is_scoring, scored_result
from seed_tot.scheduling.session import DecodeSession, SessionWork, drain


@dataclass
class _Row:
    """One request while it is being decoded."""

    request: GenerationRequest
    ticket: int
    stop: StopCriteria
    generator: torch.Generator  # drafting, verification and sampling, as in the serial decoders
    depth: int  # current draft depth (adaptive_k changes it)
    pending: int = -1  # last token, not yet in the target cache
    draft_todo: list[int] = field(default_factory=list)  # tokens not yet in the draft cache (end with pending)
    tokens: list[int] = field(default_factory=list)
    finish: FinishReason | None = None
    stats: GenerationStats = field(default_factory=GenerationStats)
    joined: float = field(default_factory=time.perf_counter)
    logits: torch.Tensor | None = None  # batched AR: the logits the next token is drawn from

    @property
    def temperature(self) -> float:
        return self.request.config.temperature

    @property
    def top_p(self) -> float:
        return self.request.config.top_p

    @property
    def remaining(self) -> int:
        return self.request.config.max_new_tokens - len(self.tokens)

    def append(self, new_tokens: list[int]) -> None:
        """Append tokens, stopping exactly where autoregressive decoding would stop."""
        start = len(self.tokens)
        self.tokens.extend(new_tokens)
        cut = self.stop.first_stop(self.tokens, start)
        if cut is not None:
            del self.tokens[cut[0] :]
            self.finish = cut[1]


def _prefix_cache(budget_mb: float) -> PrefixCache | None:
    """The KV kept across calls for one model (0 MiB: none)."""
    if budget_mb < 0:
        raise ConfigError(f"prefix_cache_mb must be >= 0 (0 turns the cache off), got {budget_mb}.")
    return PrefixCache(int(budget_mb * 2**20)) if budget_mb > 0 else None


def _new_row(ticket: int, request: GenerationRequest, runner: ModelRunner, depth: int = 0) -> _Row:
    config = request.config
    stop = stop_criteria(runner, config)
    return _Row(
        request=request,
        ticket=ticket,
        stop=stop,
        generator=torch.Generator().manual_seed(request.seed),
        depth=depth,
    )


def _chain(n: int) -> list[int]:
    return [i - 1 for i in range(n)]


def prefill(
    runner: ModelRunner,
    prompts: list[list[int]],
    share_prefix: bool,
    common_prefixes: bool = True,
    prefix_cache: PrefixCache | None = None,
) -> tuple[RaggedBatchCache, torch.Tensor | None]:
    """A ragged batch holding each prompt, and each row's logits after its prompt (B, V).

    With share_prefix, identical prompts are computed once and their cache rows repeated, and
    distinct prompts with a long common prefix compute it once when the two-stage plan of
    seed_tot/scheduling/prefix_plan.py costs fewer slots (common_prefixes=False: identical only).
    With a prefix_cache, prompts start from the KV of their longest prefix kept from earlier
    calls when that computes fewer slots than the plan, and every prompt's KV is kept for later
    calls. Returns None for the logits when every prompt is empty.
    """
    if share_prefix:
        first_index: dict[tuple[int, ...], int] = {}
        row_of = [first_index.setdefault(tuple(p), len(first_index)) for p in prompts]
        unique = [list(key) for key in first_index]
    else:
        row_of, unique = list(range(len(prompts))), [list(p) for p in prompts]
    plan = plan_prefix_sharing(unique) if share_prefix and common_prefixes else None
    fresh_cost = stage_cost([len(p) for p in unique]) if plan is None else plan_cost(unique, plan)
    matches = [prefix_cache.match(p) for p in unique] if prefix_cache is not None and any(unique) else []
    order = list(range(len(unique)))
    if matches and stage_cost([len(p) - m.length for p, m in zip(unique, matches)]) < fresh_cost:
        batch, logits = _prefill_from_kept(runner, unique, matches)
        prefix_cache.count_reuse(matches)
    elif plan is None:
        batch, logits = _prefill_rows(runner, unique)
    else:
        batch, logits, order = _prefill_in_two_stages(runner, unique, plan)
    if prefix_cache is not None and logits is not None:
        for row, index in enumerate(order):
            if unique[index] and not prefix_cache.covers(unique[index]):  # copy only what is new
                prefix_cache.add(unique[index], batch.committed_kv(row))
    position = {index: row for row, index in enumerate(order)}
    row_of = [position[u] for u in row_of]
    if row_of != list(range(batch.batch_size)):
        batch.select(row_of)
        if logits is not None:
            logits = logits[torch.tensor(row_of, dtype=torch.long)]
    return batch, logits


def _prefill_from_kept(
    runner: ModelRunner, prompts: list[list[int]], matches: list[PrefixMatch]
) -> tuple[RaggedBatchCache, torch.Tensor]:
    """Rows start from their kept prefix's KV (a miss starts empty); then the rests are computed."""
    template = next(m.kv for m in matches if m.kv is not None)
    empty = [(k[:, :, :0], v[:, :, :0]) for k, v in template]
    batch = RaggedBatchCache.from_rows(runner, [m.kv if m.kv is not None else empty for m in matches])
    return _forward_segments(batch, [p[m.length :] for p, m in zip(prompts, matches)])


def _forward_segments(batch: RaggedBatchCache, segments: list[list[int]]) -> tuple[RaggedBatchCache, torch.Tensor]:
    """Append each row's segment as committed context, one forward per length bucket (so a short
    segment is not padded to a long one's width); the batch, rows in the same order, and the
    logits after each segment's last token (B, V; NaN for a row with nothing to compute)."""
    buckets = length_buckets([len(s) for s in segments])
    if len(buckets) == 1:
        return batch, _forward_rows(batch, segments)
    parts = [batch.subset(bucket) for bucket in buckets]
    computed = [(bucket, _forward_rows(part, [segments[i] for i in bucket]))
                for part, bucket in zip(parts, buckets) if any(segments[i] for i in bucket)]
    logits = computed[0][1].new_full((batch.batch_size, computed[0][1].shape[-1]), float("nan"))
    for bucket, bucket_logits in computed:
        logits[torch.tensor(bucket, dtype=torch.long, device=logits.device)] = bucket_logits
    joined = parts[0]
    for part in parts[1:]:
        joined.extend(part)
    position = {row: j for j, row in enumerate(row for bucket in buckets for row in bucket)}
    joined.select([position[row] for row in range(batch.batch_size)])
    return joined, logits


def _forward_rows(batch: RaggedBatchCache, segments: list[list[int]]) -> torch.Tensor:
    """One forward appending each row's segment as committed context; the logits after each
    segment's last token (B, V)."""
    logits = batch.forward(segments, [_chain(len(s)) for s in segments], logits_at=[max(len(s) - 1, 0) for s in segments])
    batch.commit([list(range(len(s))) for s in segments])
    return logits[:, 0]


def _prefill_rows(runner: ModelRunner, prompts: list[list[int]]) -> tuple[RaggedBatchCache, torch.Tensor | None]:
    batch = RaggedBatchCache(runner, len(prompts))
    return _forward_segments(batch, prompts) if any(prompts) else (batch, None)


def _prefill_in_two_stages(
    runner: ModelRunner, prompts: list[list[int]], plan: list[tuple[int, list[int]]]
) -> tuple[RaggedBatchCache, torch.Tensor, list[int]]:
    """Stage 1: each group's shared prefix once; stage 2: every prompt's rest. Rows come out in
    `order` (prompt indices), which the caller maps back."""
    batch = RaggedBatchCache(runner, len(plan))
    heads = [prompts[members[0]][:length] for length, members in plan]
    if any(heads):
        batch, _ = _forward_segments(batch, heads)
    batch.select([g for g, (_, members) in enumerate(plan) for _ in members])
    order = [index for _, members in plan for index in members]
    tails = [prompts[index][length:] for length, members in plan for index in members]
    batch, logits = _forward_segments(batch, tails)
    return batch, logits, order


def batch_probabilities(logits: torch.Tensor, rows: list[_Row]) -> torch.Tensor:
    """probabilities() of each row's logits (B, ..., V) with that row's settings, one call per
    distinct (temperature, top_p) instead of one per row."""
    groups: dict[tuple[float, float], list[int]] = {}
    for i, row in enumerate(rows):
        groups.setdefault((row.temperature, row.top_p), []).append(i)
    if len(groups) == 1:
        ((temperature, top_p),) = groups
        return probabilities(logits, temperature, top_p)
    probs = torch.empty_like(logits, dtype=torch.float32)
    for (temperature, top_p), members in groups.items():
        index = torch.tensor(members, dtype=torch.long)
        probs[index] = probabilities(logits[index], temperature, top_p)
    return probs


def draft_candidates(logits: torch.Tensor, q: torch.Tensor, count: int, row: _Row) -> list[tuple[int, torch.Tensor]]:
    """`count` candidates after one draft position, as seed_tot.decoding.speculative.draft_children
    draws them (greedy: top distinct tokens with one-hot q; sampling: i.i.d. from q), with q given."""
    if row.temperature == 0.0:
        return draft_children(logits, count, 0.0, 1.0, row.generator)
    drawn = torch.multinomial(q, count, replacement=True, generator=row.generator).tolist()
    return [(int(token), q) for token in drawn]


def _next_token(logits: torch.Tensor, row: _Row) -> int:
    if row.temperature == 0.0:
        return int(logits.argmax())
    return sample(probabilities(logits, row.temperature, row.top_p), row.generator)


def _result(row: _Row, runner: ModelRunner) -> tuple[int, GenerationResult]:
    row.stats.new_tokens = len(row.tokens)
    row.stats.wall_seconds = time.perf_counter() - row.joined  # from joining the batch to leaving it
    result = GenerationResult(
        request_id=row.request.request_id or str(row.ticket),
        token_ids=list(row.tokens),
        text=runner.decode(row.tokens),
        finish_reason=row.finish or "length",
        stats=row.stats,
    )
    return row.ticket, result


def _leave_finished(batches: list[RaggedBatchCache | None], rows: list[_Row]) -> tuple[list[_Row], list[_Row]]:
    """Drop the finished rows from the batches; (rows still decoding, rows that ended)."""
    keep = [i for i, row in enumerate(rows) if row.finish is None]
    if len(keep) < len(rows):
        for batch in batches:
            if batch is not None:
                batch.select(keep)
    return [rows[i] for i in keep], [row for row in rows if row.finish is not None]


def _join_batch(running: RaggedBatchCache | None, joining: RaggedBatchCache, compact_slack: int) -> RaggedBatchCache:
    if running is None or not running.batch_size:  # nothing left to keep: start afresh
        joining.compact_slack = compact_slack
        return joining
    running.extend(joining)
    return running


class BatchedARExecutor:
    """Autoregressive decoding of all requests in one batch (one target forward per token)."""

    def __init__(
        self, target: ModelRunner, share_prefix: bool = True, compact_slack: int = 32, prefix_cache_mb: float = 1024
    ):
        self.target = target
        self.share_prefix = share_prefix
        self.prefix_cache = _prefix_cache(prefix_cache_mb)
        self.compact_slack = compact_slack
        self.name = "batched"
        self.last_timing: dict[str, float] = {}
        self.work = SessionWork()

    def session(self) -> "_ARSession":
        """A batch that requests may join between steps (continuous batching)."""
        return _ARSession(self)

    def run(self, requests: list[GenerationRequest]) -> list[GenerationResult]:
        return _run_in_session(self, requests)

    def close(self) -> None:
        """Nothing to release: the executor holds no processes."""


def _run_in_session(executor, requests: list[GenerationRequest]) -> list[GenerationResult]:
    """Every request in one fresh session until all have ended (the executors' `run`)."""
    started = time.perf_counter()
    session = executor.session()
    results = drain(session, requests)
    executor.last_timing = {"wall_seconds": time.perf_counter() - started,
                            "target_seconds": session.target_seconds, "draft_seconds": session.draft_seconds}
    return results


def _score_joining(
    executor, queued: list[tuple[int, GenerationRequest]]
) -> tuple[list[tuple[int, GenerationResult]], list[tuple[int, GenerationRequest]]]:
    """Serve the scoring requests among `queued` with one prefill of the target (shared prefixes
    and the prefix cache, as every prompt); (their results, the requests left to decode)."""
    scoring = [(ticket, request) for ticket, request in queued if is_scoring(request)]
    if not scoring:
        return [], queued
    started = time.perf_counter()
    _, logits = prefill(executor.target, [r.prompt_ids for _, r in scoring], executor.share_prefix,
                        prefix_cache=executor.prefix_cache)
    seconds = time.perf_counter() - started
    results = [(ticket, scored_result(request, row_logits, seconds, ticket))
               for (ticket, request), row_logits in zip(scoring, logits)]
    return results, [(ticket, request) for ticket, request in queued if not is_scoring(request)]


class _ARSession(DecodeSession[_Row]):
    """Batched AR: each step draws every row's next token, then ONE target forward for all rows."""

    def __init__(self, executor: BatchedARExecutor):
        super().__init__(executor.work, executor.target)
        self.executor = executor
        self.batch: RaggedBatchCache | None = None

    can_score = True

    def _join(self, queued: list[tuple[int, GenerationRequest]]) -> None:
        ex = self.executor
        started = time.perf_counter()
        self.scored, queued = _score_joining(ex, queued)
        if not queued:
            self.target_seconds += time.perf_counter() - started
            return
        rows = [_new_row(ticket, request, ex.target) for ticket, request in queued]
        batch, logits = prefill(ex.target, [r.prompt_ids for _, r in queued], ex.share_prefix, prefix_cache=ex.prefix_cache)
        for row, row_logits in zip(rows, logits):
            row.logits = row_logits
            row.stats.target_forwards += 1
        self.batch = _join_batch(self.batch, batch, ex.compact_slack)
        self.active += rows
        self.target_seconds += time.perf_counter() - started

    def _step(self) -> list[tuple[int, GenerationResult]]:
        for row in self.active:
            row.append([_next_token(row.logits, row)])
        self.active, ended = _leave_finished([self.batch], self.active)
        if self.active:
            started = time.perf_counter()
            logits = self.batch.forward([[row.tokens[-1]] for row in self.active], [[-1]] * len(self.active))[:, 0]
            self.batch.commit([[0]] * len(self.active))
            self.target_seconds += time.perf_counter() - started
            for row, row_logits in zip(self.active, logits):
                row.logits = row_logits
                row.stats.target_forwards += 1
        return [_result(row, self.executor.target) for row in ended]


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
    (no draft model). A lookup draft is deterministic given the contexts: its q is one-hot, and
    the acceptance rule (accept x with probability p(x), else sample from p without x) keeps the
    target distribution exactly, for sampling as well as greedy.
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
        self.prefix_cache = _prefix_cache(prefix_cache_mb)
        self.draft_prefix_cache = _prefix_cache(prefix_cache_mb) if self.draft is not None else None
        self.compact_slack = compact_slack
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
        return _run_in_session(self, requests)

    def _adapt(self, row: _Row, drafted_depth: int, accepted: int) -> None:
        if self.adaptive_k:
            row.depth = next_draft_depth(row.depth, drafted_depth, accepted, self.max_k)

    def _draft_step(self, batch: RaggedBatchCache, rows: list[_Row]) -> list[_Draft]:
        """Draft every row's token tree: one batched draft forward per tree level."""
        # As in the serial drafter: no deeper than the tokens the row may still emit.
        depths = [min(row.depth, row.remaining) for row in rows]
        drafts = [_Draft() for _ in rows]
        if max(depths) <= 0:
            return drafts
        feed = [row.draft_todo if d > 0 else [] for row, d in zip(rows, depths)]
        logits = batch.forward(feed, [_chain(len(f)) for f in feed], logits_at=[max(len(f) - 1, 0) for f in feed])
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

    def _lookup_step(self, active: list[_Row], everyone: list[_Row]) -> list[_Draft]:
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
            tree = self.lookup.draft(contexts[id(row)], min(row.depth, row.remaining, cap), others)
            drafts.append(_Draft(tree=tree))
        return drafts

    def _target_step(self, batch: RaggedBatchCache, rows: list[_Row], drafts: list[_Draft]) -> list[torch.Tensor]:
        """ONE batched target forward over [pending] + tree per row; each row's (1 + N, V) probabilities."""
        tokens = [[row.pending] + d.tree.tokens for row, d in zip(rows, drafts)]
        parents = [[-1] + [0 if p < 0 else 1 + p for p in d.tree.parents] for d in drafts]
        logits = batch.forward(tokens, parents)
        probs = batch_probabilities(logits, rows)
        return [probs[i, : len(t)] for i, t in enumerate(tokens)]

    def close(self) -> None:
        """Nothing to release: the executor holds no processes."""


class _SpeculativeSession(DecodeSession[_Row]):
    """Batched speculative decoding: each step drafts every row, verifies all rows in ONE target
    forward and keeps what each row accepted."""

    def __init__(self, executor: BatchedSpeculativeExecutor):
        super().__init__(executor.work, executor.target)
        self.executor = executor
        self.target_batch: RaggedBatchCache | None = None
        self.draft_batch: RaggedBatchCache | None = None
        self.lookup_rows: list[_Row] = []  # rows whose text lookup drafts may copy (groups still decoding)

    can_score = True

    def _join(self, queued: list[tuple[int, GenerationRequest]]) -> None:
        ex = self.executor
        started = time.perf_counter()
        self.scored, queued = _score_joining(ex, queued)
        self.target_seconds += time.perf_counter() - started
        if not queued:
            return
        rows = [_new_row(ticket, request, ex.target, depth=len(ex.k_config)) for ticket, request in queued]
        for row in rows:
            row.pending = row.request.prompt_ids[-1]
            row.draft_todo = [row.pending]
        heads = [r.prompt_ids[:-1] for _, r in queued]
        started = time.perf_counter()
        batch, _ = prefill(ex.target, heads, ex.share_prefix, prefix_cache=ex.prefix_cache)
        self.target_batch = _join_batch(self.target_batch, batch, ex.compact_slack)
        drafted = time.perf_counter()
        if ex.draft is not None:
            batch, _ = prefill(ex.draft, heads, ex.share_prefix, prefix_cache=ex.draft_prefix_cache)
            self.draft_batch = _join_batch(self.draft_batch, batch, ex.compact_slack)
        self.target_seconds += drafted - started
        self.draft_seconds += time.perf_counter() - drafted
        self.active += rows
        self.lookup_rows += rows

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
            row.append(verdict.accepted_tokens + [verdict.next_token])
        self.target_batch.commit(target_keep)
        if self.draft_batch:
            self.draft_batch.commit(draft_keep)
        self.active, ended = _leave_finished([self.target_batch, self.draft_batch], active)
        decoding = {row.request.group for row in self.active}
        self.lookup_rows = [row for row in self.lookup_rows if row.finish is None or row.request.group in decoding]
        return [_result(row, ex.target) for row in ended]
