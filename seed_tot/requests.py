"""What flows between the reasoning layer and the executors: requests, results, statistics."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Protocol

from seed_tot.config import DecodeConfig

FinishReason = Literal["eos", "stop", "length"]


@dataclass
class GenerationStats:
    """Counters of one request (or, merged, of many)."""

    new_tokens: int = 0
    draft_tokens_proposed: int = 0
    draft_tokens_accepted: int = 0
    target_forwards: int = 0
    draft_forwards: int = 0
    wall_seconds: float = 0.0

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

    def merge(self, other: "GenerationStats") -> "GenerationStats":
        """Sum of counters; wall seconds add up too (callers timing a batch set it themselves)."""
        return GenerationStats(
            new_tokens=self.new_tokens + other.new_tokens,
            draft_tokens_proposed=self.draft_tokens_proposed + other.draft_tokens_proposed,
            draft_tokens_accepted=self.draft_tokens_accepted + other.draft_tokens_accepted,
            target_forwards=self.target_forwards + other.target_forwards,
            draft_forwards=self.draft_forwards + other.draft_forwards,
            wall_seconds=self.wall_seconds + other.wall_seconds,
        )

    def as_dict(self) -> dict:
        return {
            "new_tokens": self.new_tokens,
            "draft_tokens_proposed": self.draft_tokens_proposed,
            "draft_tokens_accepted": self.draft_tokens_accepted,
            "target_forwards": self.target_forwards,
            "draft_forwards": self.draft_forwards,
            "wall_seconds": self.wall_seconds,
            "acceptance_rate": self.acceptance_rate,
            "tokens_per_target_forward": self.tokens_per_target_forward,
        }


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


@dataclass
class GenerationResult:
    request_id: str
    token_ids: list[int]
    text: str
    finish_reason: FinishReason
    stats: GenerationStats = field(default_factory=GenerationStats)
    candidate_logprobs: list[float] | None = None  # for a request with score_tokens, in their order


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
