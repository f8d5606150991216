"""An executor wrapper that advances a progress bar by the requests each call (or session step) finishes."""

from __future__ import annotations

from seed_tot.requests import (
    ContinuousBatching,
    Executor,
    GenerationRequest,
    GenerationResult,
    RecordsEvents,
    SessionEvents,
)


class ProgressExecutor:
    """Delegates to `inner`; ticks `bar` once per finished request and shows what ran."""

    def __init__(self, inner: Executor, bar) -> None:
        self.inner = inner
        self.bar = bar
        if isinstance(inner, ContinuousBatching):  # offer continuous batching only where inner does
            self.session = lambda: ProgressSession(inner.session(), bar)

    def run(self, requests: list[GenerationRequest]) -> list[GenerationResult]:
        results = self.inner.run(requests)
        tokens = sum(r.stats.new_tokens for r in results)
        self.bar.update(len(results))
        self.bar.set_postfix_str(f"call of {len(requests)}, {tokens} tokens")
        return results

    def close(self) -> None:
        self.inner.close()

    @property
    def last_events(self) -> list | None:
        """The inner executor's events of its last run (None when it records none)."""
        return self.inner.last_events if isinstance(self.inner, RecordsEvents) else None

    def __getattr__(self, name: str):
        return getattr(self.inner, name)


class ProgressSession:
    """A decode session whose every step ticks `bar` by the requests that ended in it."""

    def __init__(self, inner, bar) -> None:
        self.inner = inner
        self.bar = bar
        if isinstance(inner, SessionEvents):
            self.take_events = inner.take_events

    def add(self, requests: list[GenerationRequest]) -> list[int]:
        return self.inner.add(requests)

    @property
    def busy(self) -> bool:
        return self.inner.busy

    @property
    def width(self) -> int:
        return self.inner.width

    def __getattr__(self, name: str):
        return getattr(self.inner, name)

    def cancel(self, tickets: list[int]) -> None:
        self.inner.cancel(tickets)

    def step(self):
        ended = self.inner.step()
        if ended:
            self.bar.update(len(ended))
            self.bar.set_postfix_str(f"{self.inner.width} rows decoding")
        return ended
