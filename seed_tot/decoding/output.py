"""What every single-sequence decoder returns (its stop rule: token_sink.py)."""

from __future__ import annotations

from dataclasses import dataclass, field

from seed_tot.requests import FinishReason, GenerationStats


@dataclass
class DecodeOutput:
    token_ids: list[int]
    finish_reason: FinishReason
    stats: GenerationStats = field(default_factory=GenerationStats)
