"""Continuous batching: requests join a running batch between decode steps and leave it when done.

A `DecodeSession` holds the rows an in-process batched executor is decoding. `add` queues
requests (they are prefilled and join at the start of the next step) and returns one ticket per
request; `step` runs one decode step of every row and returns the results of the rows that ended
in it; `cancel` drops requests between steps (queued ones, and rows decoding, whose results then
never come). A request whose `cancel` flag is set (from any thread) ends at the start of the next
step: queued, it never joins; decoding, its row leaves the batch before the next forward; its
result comes at once, finish_reason "cancelled" and no tokens. A row's tokens depend only on its own request (its seed, its prompt), never on when it
joined, who shares the batch or who left it, so a session gives what `run` gives for each request
alone.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Generic, TypeVar

from seed_tot.errors import ConfigError
from seed_tot.requests import Cancel, GenerationRequest, GenerationResult, cancelled_result, scoring_refusal

Row = TypeVar("Row")


def check_requests(requests: list[GenerationRequest]) -> None:
    for index, request in enumerate(requests):
        if not request.prompt_ids:
            raise ConfigError(f"Request {request.request_id or index!r} has an empty prompt: give at least one prompt token.")


@dataclass
class PhaseWork:
    """Seconds spent in one phase and the target token slots its forwards computed, pads included."""

    seconds: float = 0.0
    slots: int = 0
    pad_slots: int = 0


@dataclass
class SessionWork:
    """Where sessions spent their time: letting requests join (prefill, for the in-process
    executors) and decode steps, and the rows the steps decoded. Shared by every session of
    one executor."""

    join: PhaseWork = field(default_factory=PhaseWork)
    step: PhaseWork = field(default_factory=PhaseWork)
    steps: int = 0
    step_rows: int = 0

    def as_dict(self) -> dict:
        def rounded(phase: PhaseWork) -> dict:
            return {**asdict(phase), "seconds": round(phase.seconds, 1)}

        return {"join": rounded(self.join), "step": rounded(self.step), "steps": self.steps, "step_rows": self.step_rows}


class DecodeSession(ABC, Generic[Row]):
    """Rows decoding together; subclasses say how rows join (`_join`) and how one step runs (`_step`).

    A session whose `can_score` is True serves scoring requests (score_tokens) in `_join`: it puts
    their results in `self.scored`, and the step that let them join returns them."""

    can_score = False

    def __init__(self, work: SessionWork | None = None, target=None, max_kv_tokens: int | None = None) -> None:
        self.max_kv_tokens = max_kv_tokens  # tokens the rows may hold at once (None: no bound)
        self.work = work if work is not None else SessionWork()
        self._counted = target  # the ModelRunner whose token slots `work` counts (None: none)
        self.active: list[Row] = []  # rows in batch order
        self._queued: list[tuple[int, GenerationRequest]] = []
        self._tickets = 0
        self.target_seconds = 0.0
        self.draft_seconds = 0.0
        self.joins_while_busy = 0  # joins into a batch that already had rows (continuous batching at work)
        self.scored: list[tuple[int, GenerationResult]] = []  # scoring results of the last join
        self._flagged: dict[int, tuple[Cancel, GenerationRequest]] = {}  # live tickets with a cancel flag

    def add(self, requests: list[GenerationRequest]) -> list[int]:
        """Queue requests to join at the next step; one ticket per request, in order."""
        check_requests(requests)
        if not self.can_score and any(r.score_tokens is not None for r in requests):
            owner = getattr(self, "executor", None) or getattr(self, "ex", None)  # SEED's session calls it ex
            raise ConfigError(scoring_refusal(getattr(owner, "name", type(self).__name__)))
        tickets = list(range(self._tickets, self._tickets + len(requests)))
        self._tickets += len(requests)
        self._queued.extend(zip(tickets, requests))
        self._flagged.update((t, (r.cancel, r)) for t, r in zip(tickets, requests) if r.cancel is not None)
        return tickets

    def cancel(self, tickets: list[int]) -> None:
        """Drop these requests now, between steps: queued ones never join, rows decoding leave the
        batch; no result comes for any of them. Tickets that already ended are ignored."""
        dropped = set(tickets)
        for ticket in dropped:
            self._flagged.pop(ticket, None)
        self._queued = [(ticket, request) for ticket, request in self._queued if ticket not in dropped]
        if any(row.ticket in dropped for row in self.active):
            self._remove(dropped)

    @property
    def busy(self) -> bool:
        return bool(self.active or self._queued)

    @property
    def width(self) -> int:
        """Rows that the next step decodes (queued ones included)."""
        return len(self.active) + len(self._queued)

    def step(self) -> list[tuple[int, GenerationResult]]:
        """End the cancelled requests, let queued ones join, run one decode step; (ticket, result)
        of each row that ended."""
        ended = self._end_cancelled() if self._flagged else []
        if self._queued:
            queued, self._queued = admitted(self._queued, self.active, self.max_kv_tokens)
            self.joins_while_busy += bool(self.active)
            with self._measured(self.work.join):
                self._join(queued)
        scored, self.scored = self.scored, []
        ended += scored
        if self.active:
            self.work.steps += 1
            self.work.step_rows += len(self.active)
            with self._measured(self.work.step):
                ended += self._step()
        for ticket, _ in ended:
            self._flagged.pop(ticket, None)
        return ended

    def _end_cancelled(self) -> list[tuple[int, GenerationResult]]:
        """Take out the requests whose flag is set; their (empty, "cancelled") results."""
        flagged = [(ticket, request) for ticket, (flag, request) in self._flagged.items() if flag.is_set()]
        if not flagged:
            return []
        self.cancel([ticket for ticket, _ in flagged])
        return [(ticket, cancelled_result(request, ticket)) for ticket, request in flagged]

    @contextmanager
    def _measured(self, phase: PhaseWork):
        """Add the time and the counted runner's token slots of the block to `phase`."""
        runner = self._counted
        started = time.perf_counter()
        slots, pads = (runner.token_slots, runner.pad_slots) if runner is not None else (0, 0)
        try:
            yield
        finally:
            phase.seconds += time.perf_counter() - started
            if runner is not None:
                phase.slots += runner.token_slots - slots
                phase.pad_slots += runner.pad_slots - pads

    @abstractmethod
    def _join(self, queued: list[tuple[int, GenerationRequest]]) -> None:
        """Prefill the queued requests and append their rows to the batch."""

    @abstractmethod
    def _remove(self, tickets: set[int]) -> None:
        """Take the rows of `tickets` out of the batch and out of `self.active` (between steps)."""

    @abstractmethod
    def _step(self) -> list[tuple[int, GenerationResult]]:
        """One decode step of every active row; drop and return the rows that ended."""


def held_tokens(request: GenerationRequest) -> int:
    """The most KV tokens a request's row can hold: its prompt and every token it may generate
    (a scoring request only reads its prompt)."""
    new = 0 if request.score_tokens is not None else request.config.max_new_tokens
    return len(request.prompt_ids) + new


def admitted(queued: list, active: list, max_kv_tokens: int | None) -> tuple[list, list]:
    """(the queued requests that join now, those that wait): in queue order, while the rows' KV
    stays within `max_kv_tokens`; an empty batch always takes its first request, so a request
    larger than the budget still runs, alone."""
    if max_kv_tokens is None:
        return queued, []
    held = sum(held_tokens(row.request) for row in active)
    for count, (_, request) in enumerate(queued):
        held += held_tokens(request)
        if held > max_kv_tokens and (count or active):
            return queued[:count], queued[count:]
    return queued, []


def drain(session: DecodeSession, requests: list[GenerationRequest]) -> list[GenerationResult]:
    """Decode `requests` in `session` until all have ended; results in request order."""
    tickets = session.add(requests)
    found: dict[int, GenerationResult] = {}
    while session.busy:
        found.update(session.step())
    return [found[t] for t in tickets]
