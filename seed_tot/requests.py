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
    cached_prompt_tokens: int = 0  # prompt tokens an inference server reused from its cache

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
            cached_prompt_tokens=self.cached_prompt_tokens + other.cached_prompt_tokens,
        )

    def as_dict(self) -> dict:
        return {
            "new_tokens": self.new_tokens,
            "draft_tokens_proposed": self.draft_tokens_proposed,
            "draft_tokens_accepted": self.draft_tokens_accepted,
            "target_forwards": self.target_forwards,
            "draft_forwards": self.draft_forwards,
            "wall_seconds": self.wall_seconds,
            "cached_prompt_tokens": self.cached_prompt_tokens,
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


@dataclass
class GenerationResult:
    request_id: str
    token_ids: list[int]
    text: str
    finish_reason: FinishReason
    stats: GenerationStats = field(default_factory=GenerationStats)


class Executor(Protocol):
    """Runs a batch of requests (one tree expansion) and returns one result per request, in order."""

    name: str

    def run(self, requests: list[GenerationRequest]) -> list[GenerationResult]: ...

    def close(self) -> None: ...
