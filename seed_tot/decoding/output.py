"""What every single-sequence decoder returns, and the shared stopping rule."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from seed_tot.requests import FinishReason, GenerationStats


@dataclass
class DecodeOutput:
    token_ids: list[int]
    finish_reason: FinishReason
    stats: GenerationStats = field(default_factory=GenerationStats)


@dataclass
class StopCriteria:
    """Generation ends right after the first token that is EOS, completes a stop string, or
    reaches max_new_tokens. Every decoder applies this same rule token by token, so decoders
    that accept several tokens per step stop exactly where autoregressive decoding stops."""

    max_new_tokens: int
    eos_token_ids: frozenset[int] = frozenset()
    stop_strings: tuple[str, ...] = ()
    decode: Callable[[list[int]], str] | None = None

    def first_stop(self, new_ids: list[int], start: int = 0) -> tuple[int, FinishReason] | None:
        """Scan new_ids[start:]; return (number of tokens to keep, reason) or None."""
        for i in range(start, len(new_ids)):
            if new_ids[i] in self.eos_token_ids:
                return i + 1, "eos"
            if self.stop_strings and self.decode is not None:
                text = self.decode(new_ids[: i + 1])
                if any(s in text for s in self.stop_strings):
                    return i + 1, "stop"
            if i + 1 >= self.max_new_tokens:
                return i + 1, "length"
        return None
