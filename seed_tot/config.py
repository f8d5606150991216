"""Pydantic models at the boundaries: what users pass in and what trace files record."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator

from seed_tot.errors import ConfigError


class DecodeConfig(BaseModel):
    """Sampling settings of one generation request."""

    model_config = ConfigDict(frozen=True)

    max_new_tokens: int = Field(128, ge=1)
    temperature: float = Field(0.0, ge=0.0)
    top_p: float = Field(1.0, gt=0.0, le=1.0)
    stop: tuple[str, ...] = ()
    # For benchmarks: every request makes exactly max_new_tokens, so executors compare on equal
    # lengths (sampled requests otherwise end at EOS at different points per method).
    ignore_eos: bool = False
    # Stop strings count only once the reply has a non-blank character, so a reply that opens with
    # a line break (the next line of a chain) is not cut before it says anything.
    stop_after_text: bool = False

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0

    @property
    def server_stops(self) -> list[str]:
        """The stop strings an engine server may apply itself: none when they count only after the
        reply's first text (servers cannot skip leading blanks; the project's stop rule cuts the reply)."""
        return [] if self.stop_after_text else list(self.stop)

    def with_stop(self, strings: tuple[str, ...] | list[str]) -> "DecodeConfig":
        """This config with `strings` added to its stop strings (those already there kept once)."""
        extra = tuple(s for s in dict.fromkeys(strings) if s not in self.stop)
        return self.model_copy(update={"stop": (*self.stop, *extra)}) if extra else self


def parse_k_config(text: str | tuple[int, ...] | list[int]) -> tuple[int, ...]:
    """Parse a token-tree shape such as "2,2,1": candidates per draft position, each >= 1."""
    if isinstance(text, str):
        parts = [p.strip() for p in text.replace("(", "").replace(")", "").split(",") if p.strip()]
        try:
            values = tuple(int(p) for p in parts)
        except ValueError:
            raise ConfigError(
                f"Bad k_config {text!r}: give comma-separated positive integers such as 2,2,1."
            ) from None
    else:
        values = tuple(int(v) for v in text)
    if not values or any(v < 1 for v in values) or len(values) > 16:
        raise ConfigError(
            f"Bad k_config {text!r}: give 1 to 16 comma-separated positive integers such as 2,2,1."
        )
    return values


def draft_shape(k: int | None, k_config, default: tuple[int, ...] | None) -> tuple[int, ...] | None:
    """The draft token-tree shape: `k_config` ("2,2,1" or a tuple), or a chain of `k` tokens, or
    `default` when neither is given. Both at once, or a k below 1, is refused in one sentence."""
    if k is not None and k_config is not None:
        raise ConfigError("Give either k or k_config (--k or --k-config), not both: k=4 means k_config=1,1,1,1.")
    if k is not None:
        if int(k) < 1:
            raise ConfigError(f"Bad draft length k={k}: give a positive number of draft tokens.")
        return (1,) * int(k)
    if k_config is not None:
        return parse_k_config(k_config)
    return None if default is None else parse_k_config(default)


class SpeculationConfig(BaseModel):
    """Draft shape for speculative decoding: k_config=(1,1,1) is plain SD with k=3."""

    model_config = ConfigDict(frozen=True)

    k_config: tuple[int, ...] = (1, 1, 1)

    @field_validator("k_config", mode="before")
    @classmethod
    def _parse(cls, value):
        return parse_k_config(value)
