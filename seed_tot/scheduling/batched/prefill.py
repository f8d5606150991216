"""Prefill of a batch of prompts into a RaggedBatchCache: identical prompts computed once, long
common prefixes computed once when that costs fewer slots, KV kept across calls reused, and one
forward per length bucket."""

from __future__ import annotations

import time

import torch

from seed_tot.requests import GenerationRequest, GenerationResult
from seed_tot.runtime.ragged import RaggedBatchCache
from seed_tot.runtime.runner import ModelRunner
from seed_tot.scheduling.buckets import length_buckets
from seed_tot.scheduling.prefix_cache import PrefixCache, PrefixMatch
from seed_tot.scheduling.prefix_plan import plan_cost, plan_prefix_sharing, stage_cost
from seed_tot.scheduling.scoring import is_scoring, scored_result


def chain_parents(n: int) -> list[int]:
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
    logits = batch.forward(segments, [chain_parents(len(s)) for s in segments], logits_at=[max(len(s) - 1, 0) for s in segments])
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


def score_joining(
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
