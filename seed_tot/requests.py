"""What flows between the reasoning layer and the executors: requests, results, statistics,
and the executor protocols (the required `Executor`, the `Session` of continuous batching and
the optional capabilities an executor may offer)."""

from __future__ import annotations

import threading
from dataclasses import asdict, dataclass, field, fields
from typing import Literal, Protocol, runtime_checkable

from seed_tot.config import DecodeConfig

FinishReason = Literal["eos", "stop", "length", "cancelled"]


class Cancel:
    """A flag that whoever sent requests sets, from any thread, to stop them: a session that sees it
    ends their rows at its next decode step (finish_reason "cancelled", no tokens) and frees their
    memory. Copies of a request share the flag; a request pickled for another process arrives with
    a fresh, unset one (that process cannot see this one)."""

    __slots__ = ("_event",)

    def __init__(self) -> None:
        self._event = threading.Event()

    def set(self) -> None:
        self._event.set()

    def is_set(self) -> bool:
        return self._event.is_set()

    def __reduce__(self):
        return (Cancel, ())

    def __deepcopy__(self, memo) -> "Cancel":
        return self


@dataclass
class DecodeCounters:
    """What decoding did: new tokens, target and draft forwards, draft tokens proposed and accepted.
    A request's GenerationStats starts with them; RunMetrics sums them over a search's batches."""

    new_tokens: int = 0
    draft_tokens_proposed: int = 0
    draft_tokens_accepted: int = 0
    target_forwards: int = 0
    draft_forwards: int = 0

    @property
    def acceptance_rate(self) -> float | None:
        if self.draft_tokens_proposed == 0:
            return None
        return self.draft_tokens_accepted / self.draft_tokens_proposed

    @property
    def tokens_per_target_forward(self) -> float | None:
        if self.target_forwards == 0:
            return None
        return self.new_tokens / self.target_forwards


@dataclass
class GenerationStats(DecodeCounters):
    """Counters of one request (or, merged, of many): the decoding counters, then its wall time
    and the prompt tokens a server's cache served."""

    wall_seconds: float = 0.0
    cached_prompt_tokens: int = 0  # prompt tokens an inference server reused from its cache

    def merge(self, other: "GenerationStats") -> "GenerationStats":
        """Sum of counters, field by field; wall seconds add up too (callers timing a batch set it
        themselves)."""
        return GenerationStats(**{f.name: getattr(self, f.name) + getattr(other, f.name) for f in fields(self)})

    def as_dict(self) -> dict:
        """The counters, then the acceptance rate and tokens per target forward."""
        data = asdict(self)
        data["acceptance_rate"] = self.acceptance_rate
        data["tokens_per_target_forward"] = self.tokens_per_target_forward
        return data


@dataclass
class GenerationRequest:
    """One generation: prompt token ids (chat template already applied), settings and a seed."""

    prompt_ids: list[int]
    config: DecodeConfig = field(default_factory=DecodeConfig)
    seed: int = 0
    request_id: str = ""
    # Requests of one group (a problem) may share draft sources; executors never let one group's
    # rows change another group's tokens.
    group: str = ""
    # Scoring instead of generating: when set, nothing is generated and the result's
    # `candidate_logprobs` holds the model's next-token log-probabilities (temperature 1, no top-p)
    # of these token ids after the prompt, from one forward over it. Executors that cannot read
    # log-probabilities refuse such a request (`scoring_refusal`).
    score_tokens: tuple[int, ...] | None = None
    cancel: Cancel | None = field(default=None, compare=False, repr=False)


@dataclass
class GenerationResult:
    request_id: str
    token_ids: list[int]
    text: str
    finish_reason: FinishReason
    stats: GenerationStats = field(default_factory=GenerationStats)
    candidate_logprobs: list[float] | None = None  # for a request with score_tokens, in their order


def cancelled_result(request: GenerationRequest, ticket: int) -> GenerationResult:
    """The result of a request cancelled before it ended: no tokens."""
    return GenerationResult(request_id=request.request_id or str(ticket), token_ids=[], text="",
                            finish_reason="cancelled")


def scoring_refusal(executor_name: str) -> str:
    """The one sentence an executor that cannot serve `score_tokens` raises."""
    return (
        f"The {executor_name} executor cannot read next-token log-probabilities: use --value-mode samples, "
        "or an in-process method that can, such as ar, batched or batched-lookup."
    )


class Executor(Protocol):
    """Runs a batch of requests (one tree expansion) and returns one result per request, in order."""

    name: str

    def run(self, requests: list[GenerationRequest]) -> list[GenerationResult]: ...

    def close(self) -> None: ...


class Session(Protocol):
    """Continuous batching: requests join a running batch between decode steps and leave it when
    done (seed_tot/scheduling/session.py). A row's tokens depend only on its own request."""

    @property
    def busy(self) -> bool:
        """Whether rows are decoding or queued."""
        ...

    @property
    def width(self) -> int:
        """Rows that the next step decodes (queued ones included)."""
        ...

    def add(self, requests: list[GenerationRequest]) -> list[int]:
        """Queue requests to join at the next step; one ticket per request, in order."""
        ...

    def step(self) -> list[tuple[int, GenerationResult]]:
        """One decode step of every row; (ticket, result) of each row that ended in it."""
        ...

    def cancel(self, tickets: list[int]) -> None:
        """Drop these requests between steps: no result comes for any of them."""
        ...


# Optional capabilities. An executor (or session) offers one by having its members; callers ask
# with isinstance(x, Capability), so what may be there is declared here, once.


@runtime_checkable
class ContinuousBatching(Protocol):
    """An executor that opens continuous-batching sessions (the batched executors and SEED)."""

    def session(self) -> Session: ...


@runtime_checkable
class RecordsEvents(Protocol):
    """An executor whose last run() left its scheduler events (or None) in `last_events` (SEED)."""

    last_events: list | None


@runtime_checkable
class SessionEvents(Protocol):
    """A session that hands out the scheduler events of finished tickets (SEED's)."""

    def take_events(self, tickets: list[int]) -> list: ...
