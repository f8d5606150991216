"""SEED's scheduler settings."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

from seed_tot.config import parse_k_config
from seed_tot.errors import ConfigError

Discipline = Literal["fcfs", "round-robin"]
DISCIPLINES = ("fcfs", "round-robin")


@dataclass(frozen=True)
class SeedOptions:
    """Scheduler settings; every option is lossless (results do not change, only speed).

    batched_verify: verify every waiting draft in ONE target forward.
    share_prefix: requests with the same prompt prefill the target once (zero-copy forks).
    adaptive_k: per-request draft depth that grows after a fully accepted draft and shrinks
        after a draft rejected at its first position (between 1 and max_depth).
    discipline: "fcfs" (the paper) or "round-robin" (serve the workers in cyclic order).
    inject_fault: test-only hook for the workers ("load", "draft:N" or "hang:N", see FaultInjection).
    """

    k_config: tuple[int, ...] = (1, 1, 1)
    discipline: Discipline = "fcfs"
    batched_verify: bool = False
    share_prefix: bool = False
    adaptive_k: bool = False
    max_depth: int = 8
    target_threads: int | None = 1
    worker_threads: int = 1
    start_timeout_s: float = 600.0
    stall_timeout_s: float = 600.0
    inject_fault: str | None = None

    def validated(self) -> "SeedOptions":
        k_config = parse_k_config(self.k_config)
        if self.discipline not in DISCIPLINES:
            raise ConfigError(f"Unknown queue discipline {self.discipline!r}: use one of {', '.join(DISCIPLINES)}.")
        if self.max_depth < 1 or self.max_depth > 16:
            raise ConfigError(f"max_depth must be between 1 and 16, got {self.max_depth}.")
        if self.worker_threads < 1 or (self.target_threads is not None and self.target_threads < 1):
            raise ConfigError("Thread counts must be at least 1.")
        return replace(self, k_config=k_config)

    def deepest_k_config(self) -> tuple[int, ...]:
        return shaped_k_config(self.k_config, max(self.max_depth, len(self.k_config)) if self.adaptive_k else len(self.k_config))


def shaped_k_config(k_config: tuple[int, ...], depth: int) -> tuple[int, ...]:
    """The k_config cut or extended (with single candidates) to `depth` levels."""
    return tuple(k_config[:depth]) + (1,) * max(0, depth - len(k_config))
