"""Batched autoregressive decoding: each step draws every row's next token, then ONE target
forward for all rows."""

from __future__ import annotations

import time

import torch

from seed_tot.decoding.sampling import probabilities, sample
from seed_tot.requests import GenerationRequest, GenerationResult
from seed_tot.runtime.ragged import RaggedBatchCache
from seed_tot.runtime.runner import ModelRunner
from seed_tot.scheduling.batched.prefill import prefill, score_joining
from seed_tot.scheduling.batched.rows import (
    Row, join_batch, leave_cancelled, leave_finished, make_prefix_cache, new_row, row_result, run_in_session,
)
from seed_tot.scheduling.session import DecodeSession, SessionWork


def _next_token(logits: torch.Tensor, row: Row) -> int:
    if row.temperature == 0.0:
        return int(logits.argmax())
    return sample(probabilities(logits, row.temperature, row.top_p), row.generator)


class BatchedARExecutor:
    """Autoregressive decoding of all requests in one batch (one target forward per token)."""

    def __init__(
        self, target: ModelRunner, share_prefix: bool = True, compact_slack: int = 32, prefix_cache_mb: float = 1024,
        max_kv_tokens: int | None = None,
    ):
        self.target = target
        self.max_kv_tokens = max_kv_tokens  # rows' KV tokens held at once (a memory budget); None: no bound
        self.share_prefix = share_prefix
        self.prefix_cache = make_prefix_cache(prefix_cache_mb)
        self.compact_slack = compact_slack
        self.name = "batched"
        self.last_timing: dict[str, float] = {}
        self.work = SessionWork()

    def session(self) -> "_ARSession":
        """A batch that requests may join between steps (continuous batching)."""
        return _ARSession(self)

    def run(self, requests: list[GenerationRequest]) -> list[GenerationResult]:
        return run_in_session(self, requests)

    def close(self) -> None:
        """Nothing to release: the executor holds no processes."""


class _ARSession(DecodeSession[Row]):
    """Batched AR: each step draws every row's next token, then ONE target forward for all rows."""

    def __init__(self, executor: BatchedARExecutor):
        super().__init__(executor.work, executor.target, executor.max_kv_tokens)
        self.executor = executor
        self.batch: RaggedBatchCache | None = None

    can_score = True

    def _join(self, queued: list[tuple[int, GenerationRequest]]) -> None:
        ex = self.executor
        started = time.perf_counter()
        self.scored, queued = score_joining(ex, queued)
        if not queued:
            self.target_seconds += time.perf_counter() - started
            return
        rows = [new_row(ticket, request, ex.target) for ticket, request in queued]
        batch, logits = prefill(ex.target, [r.prompt_ids for _, r in queued], ex.share_prefix, prefix_cache=ex.prefix_cache)
        for row, row_logits in zip(rows, logits):
            row.logits = row_logits
            row.stats.target_forwards += 1
        self.batch = join_batch(self.batch, batch, ex.compact_slack)
        self.active += rows
        self.target_seconds += time.perf_counter() - started

    def _remove(self, tickets: set[int]) -> None:
        self.active = leave_cancelled([self.batch], self.active, tickets)

    def _step(self) -> list[tuple[int, GenerationResult]]:
        for row in self.active:
            row.sink.extend([_next_token(row.logits, row)])
        self.active, ended = leave_finished([self.batch], self.active)
        if self.active:
            started = time.perf_counter()
            logits = self.batch.forward([[row.tokens[-1]] for row in self.active], [[-1]] * len(self.active))[:, 0]
            self.batch.commit([[0]] * len(self.active))
            self.target_seconds += time.perf_counter() - started
            for row, row_logits in zip(self.active, logits):
                row.logits = row_logits
                row.stats.target_forwards += 1
        return [row_result(row, self.executor.target) for row in ended]
