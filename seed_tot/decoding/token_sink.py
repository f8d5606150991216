"""Where every decoder and executor puts the tokens it accepts: one stop rule, one finish reason.

Generation ends right after the first token that is EOS (unless the request ignores EOS),
completes a stop string, or reaches max_new_tokens. Decoders that accept several tokens per step
(speculative, Jacobi, lookahead, batched rows, SEED) append them all at once; the sink scans them
token by token and cuts after the first stop, so every decoder ends exactly where autoregressive
decoding ends, with the same finish reason. Pure: no model, no tensor.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from seed_tot.config import DecodeConfig
from seed_tot.requests import FinishReason


@dataclass(frozen=True)
class StopCriteria:
    """The stop rule of one request. `decode` turns token ids into text (for the stop strings)."""

    max_new_tokens: int
    eos_token_ids: frozenset[int] = frozenset()
    stop_strings: tuple[str, ...] = ()
    decode: Callable[[list[int]], str] | None = None
    after_text: bool = False  # stop strings are looked for after the reply's leading white space only

    def first_stop(self, new_ids: list[int], start: int = 0) -> tuple[int, FinishReason] | None:
        """Scan new_ids[start:]; return (number of tokens to keep, reason) or None."""
        for i in range(start, len(new_ids)):
            if new_ids[i] in self.eos_token_ids:
                return i + 1, "eos"
            if self.stop_strings and self.decode is not None:
                text = self.decode(new_ids[: i + 1])
                if self.after_text:
                    text = text.lstrip()
                if any(s in text for s in self.stop_strings):
                    return i + 1, "stop"
            if i + 1 >= self.max_new_tokens:
                return i + 1, "length"
        return None


def stop_rule(config: DecodeConfig, eos_token_ids: frozenset[int], decode: Callable[[list[int]], str] | None) -> StopCriteria:
    """A request's stop rule: its budget and stop strings, EOS unless it ignores EOS."""
    return StopCriteria(
        max_new_tokens=config.max_new_tokens,
        eos_token_ids=frozenset() if config.ignore_eos else eos_token_ids,
        stop_strings=tuple(config.stop),
        decode=decode,
        after_text=config.stop_after_text,
    )


class Decodes(Protocol):
    """What a sink needs of a model: its EOS ids and its tokenizer's decode (a ModelRunner)."""

    eos_token_ids: frozenset[int]

    def decode(self, token_ids: list[int]) -> str: ...


@dataclass
class TokenSink:
    """The generated tokens of one request, cut by its stop rule; `finish_reason` is set once it ended."""

    stop: StopCriteria
    token_ids: list[int] = field(default_factory=list)
    finish_reason: FinishReason | None = None

    @classmethod
    def of(cls, model: Decodes, config: DecodeConfig) -> TokenSink:
        """An empty sink for a request decoded by `model`."""
        return cls(stop_rule(config, model.eos_token_ids, model.decode))

    def extend(self, accepted: list[int]) -> bool:
        """Append accepted tokens, cut after the first stop among them; True once generation ended."""
        if self.finished:
            raise ValueError("tokens appended after the generation ended")
        start = len(self.token_ids)
        self.token_ids.extend(accepted)
        hit = self.stop.first_stop(self.token_ids, start)
        if hit is not None:
            keep, self.finish_reason = hit
            del self.token_ids[keep:]
        return self.finished

    @property
    def finished(self) -> bool:
        return self.finish_reason is not None

    @property
    def remaining(self) -> int:
        """Tokens the budget still allows."""
        return self.stop.max_new_tokens - len(self.token_ids)
