"""A request while a batched executor decodes it (`Row`), and what every batched session does
with rows: create them, draw their probabilities, let them join and leave the batch, and turn
them into results."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch

from seed_tot.decoding.sampling import probabilities
from seed_tot.decoding.token_sink import TokenSink
from seed_tot.errors import ConfigError
from seed_tot.requests import GenerationRequest, GenerationResult, GenerationStats
from seed_tot.runtime.ragged import RaggedBatchCache
from seed_tot.runtime.runner import ModelRunner
from seed_tot.scheduling.prefix_cache import PrefixCache
from seed_tot.scheduling.session import drain


@dataclass
class Row:
    """One request while it is being decoded."""

    request: GenerationRequest
    ticket: int
    sink: TokenSink  # the tokens generated so far, and whether and why they ended
    generator: torch.Generator  # drafting, verification and sampling, as in the serial decoders
    depth: int  # current draft depth (adaptive_k changes it)
    pending: int = -1  # last token, not yet in the target cache
    draft_todo: list[int] = field(default_factory=list)  # tokens not yet in the draft cache (end with pending)
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
    def tokens(self) -> list[int]:
        return self.sink.token_ids


def make_prefix_cache(budget_mb: float) -> PrefixCache | None:
    """The KV kept across calls for one model (0 MiB: none)."""
    if budget_mb < 0:
        raise ConfigError(f"prefix_cache_mb must be >= 0 (0 turns the cache off), got {budget_mb}.")
    return PrefixCache(int(budget_mb * 2**20)) if budget_mb > 0 else None


def new_row(ticket: int, request: GenerationRequest, runner: ModelRunner, depth: int = 0) -> Row:
    return Row(
        request=request,
        ticket=ticket,
        sink=TokenSink.of(runner, request.config),
        generator=torch.Generator().manual_seed(request.seed),
        depth=depth,
    )


def batch_probabilities(logits: torch.Tensor, rows: list[Row]) -> torch.Tensor:
    """probabilities() of each row's logits (B, ..., V) with that row's settings, one call per
    distinct (temperature, top_p) instead of one per row."""
    groups: dict[tuple[float, float], list[int]] = {}
    for i, row in enumerate(rows):
        groups.setdefault((row.temperature, row.top_p), []).append(i)
    if len(groups) == 1:
        ((temperature, top_p),) = groups
        return probabilities(logits, temperature, top_p)
    probs = torch.empty(logits.shape, dtype=torch.float32)  # on the CPU, as probabilities() returns
    for (temperature, top_p), members in groups.items():
        index = torch.tensor(members, dtype=torch.long)
        probs[index] = probabilities(logits[index.to(logits.device)], temperature, top_p)
    return probs


def row_result(row: Row, runner: ModelRunner) -> tuple[int, GenerationResult]:
    row.stats.new_tokens = len(row.tokens)
    row.stats.wall_seconds = time.perf_counter() - row.joined  # from joining the batch to leaving it
    result = GenerationResult(
        request_id=row.request.request_id or str(row.ticket),
        token_ids=list(row.tokens),
        text=runner.decode(row.tokens),
        finish_reason=row.sink.finish_reason or "length",
        stats=row.stats,
    )
    return row.ticket, result


def leave_finished(batches: list[RaggedBatchCache | None], rows: list[Row]) -> tuple[list[Row], list[Row]]:
    """Drop the finished rows from the batches; (rows still decoding, rows that ended)."""
    return _keep(batches, rows, [not row.sink.finished for row in rows]), [row for row in rows if row.sink.finished]


def leave_cancelled(batches: list[RaggedBatchCache | None], rows: list[Row], tickets: set[int]) -> list[Row]:
    """Drop the rows of `tickets` from the batches; the rows that stay."""
    return _keep(batches, rows, [row.ticket not in tickets for row in rows])


def _keep(batches: list[RaggedBatchCache | None], rows: list[Row], kept: list[bool]) -> list[Row]:
    keep = [i for i, stays in enumerate(kept) if stays]
    if len(keep) < len(rows):
        for batch in batches:
            if batch is not None:
                batch.select(keep)
    return [rows[i] for i in keep]


def join_batch(running: RaggedBatchCache | None, joining: RaggedBatchCache, compact_slack: int) -> RaggedBatchCache:
    if running is None or not running.batch_size:  # nothing left to keep: start afresh
        joining.compact_slack = compact_slack
        return joining
    running.extend(joining)
    return running


def run_in_session(executor, requests: list[GenerationRequest]) -> list[GenerationResult]:
    """Every request in one fresh session until all have ended (the executors' `run`)."""
    started = time.perf_counter()
    session = executor.session()
    results = drain(session, requests)
    executor.last_timing = {"wall_seconds": time.perf_counter() - started,
                            "target_seconds": session.target_seconds, "draft_seconds": session.draft_seconds}
    return results
