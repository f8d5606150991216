"""An executor wrapper that advances a progress bar once per batch (one tree-level expansion step)."""

from __future__ import annotations

from seed_tot.requests import Executor, GenerationRequest, GenerationResult


class ProgressExecutor:
    """Delegates to `inner`; after each batch, ticks `bar` and shows the batch's size and tokens."""

    def __init__(self, inner: Executor, bar) -> None:
        self.inner = inner
        self.bar = bar

    def run(self, requests: list[GenerationRequest]) -> list[GenerationResult]:
        results = self.inner.run(requests)
        tokens = sum(r.stats.new_tokens for r in results)
        self.bar.update(1)
        self.bar.set_postfix_str(f"batch of {len(requests)}, {tokens} tokens")
        return results

    def close(self) -> None:
        self.inner.close()

    def __getattr__(self, name: str):
        return getattr(self.inner, name)
