"""The SEED executor: parallel draft processes, one verifier (this process) with the target.
It owns the worker pool's lifecycle; the verifier loop is verifier.py's session."""

from __future__ import annotations

import time
import weakref
from dataclasses import replace

import torch

from seed_tot.errors import ConfigError, TokenizerMismatchError, WorkerError
from seed_tot.requests import GenerationRequest, GenerationResult
from seed_tot.runtime import ModelRunner
from seed_tot.scheduling.events import Event
from seed_tot.scheduling.seed.options import SeedOptions
from seed_tot.scheduling.seed.pool import WorkerPool
from seed_tot.scheduling.seed.verifier import SeedSession
from seed_tot.scheduling.seed.worker import DraftSource, NamedDraft, Ready, tree_size
from seed_tot.scheduling.session import SessionWork, check_requests, drain


class SeedExecutor:
    """The SEED executor: parallel draft processes, one verifier (this process) with the target.

    `draft` is a model name for seed_tot.models.load_model (loaded once by each worker, in the
    dtype resolve_draft_dtype picks) or a draft source from worker.py (NamedDraft, TinyDraft).
    Worker logs reach this process's loggers through a logging QueueHandler/QueueListener
    (multiprocessing-logging's install_mp_handler refuses the 'spawn' start method).
    `last_events` holds the scheduler events of the last run(). In the per-request stats, a
    batched verification counts as one target forward for each request it verified.
    """

    def __init__(
        self,
        target: ModelRunner,
        draft: DraftSource | str,
        num_workers: int = 3,
        options: SeedOptions | None = None,
        name: str = "seed",
        **option_overrides,
    ):
        self.name = name
        self.target = target
        self.draft = _named_draft(draft, target) if isinstance(draft, str) else draft
        if num_workers < 1:
            raise ConfigError(f"SEED needs at least one draft worker, got {num_workers}.")
        self.num_workers = num_workers
        self.options = replace(options or SeedOptions(), **option_overrides).validated()
        self.last_events: list[Event] = []
        self.work = SessionWork()
        self._check_pair()
        self.pool = WorkerPool()
        self._finalizer = weakref.finalize(self, self.pool.close, graceful=False, from_finalizer=True)

    # -- lifecycle

    def _check_pair(self) -> None:
        tokenizer = self.draft.load_tokenizer()  # raises ModelNotFoundError for unknown models
        from seed_tot.models.loading import tokenizers_match

        if not tokenizers_match(tokenizer, self.target.tokenizer):
            raise TokenizerMismatchError(
                f"Draft model {_describe(self.draft)!r} and target model {self.target.name!r} use different tokenizers: "
                "speculative decoding needs a pair from one tokenizer family."
            )

    @property
    def worker_pids(self) -> list[int]:
        return [w.process.pid for w in self.pool.workers]

    def start(self) -> None:
        """Spawn the draft workers and wait until each has loaded its model (done by run() on first use).

        Options may change between runs; a change the workers depend on (tree size of the shared q
        buffers, worker threads, fault injection) restarts them.
        """
        if self.pool.workers and not self._pool_fits():
            self.pool.close(graceful=True)
        if self.pool.workers:
            return
        try:
            self._spawn()
        except BaseException:
            self.pool.close(graceful=False)
            raise

    def _spawn_settings(self) -> tuple:
        return (tree_size(self.options.deepest_k_config()), self.options.worker_threads, self.options.inject_fault)

    def _pool_fits(self) -> bool:
        rows, threads, fault = self._spawn_settings()
        spawned_rows, spawned_threads, spawned_fault = self.pool.spawned_with
        return rows <= spawned_rows and threads == spawned_threads and fault == spawned_fault

    def _spawn(self) -> None:
        rows = tree_size(self.options.deepest_k_config())
        vocab = self.target.vocab_size
        self.pool.spawn(self.num_workers, self.draft, rows, vocab, self.options, self._spawn_settings())
        deadline = time.monotonic() + self.options.start_timeout_s
        waiting = set(range(self.num_workers))
        while waiting:
            for msg in self.pool.receive(deadline - time.monotonic(), only=waiting):
                if not isinstance(msg, Ready):
                    raise WorkerError(f"Draft worker {msg.worker} sent {type(msg).__name__} before it was ready.")
                if msg.vocab_size != vocab:
                    raise ConfigError(
                        f"Draft model {msg.model_name!r} has {msg.vocab_size} logits and target "
                        f"{self.target.name!r} {vocab}: use a draft/target pair with one vocabulary."
                    )
                waiting.discard(msg.worker)

    def close(self) -> None:
        """Stop the workers (they are restarted by the next run())."""
        self.pool.close(graceful=True)

    @property
    def worker_peak_rss_mib(self) -> list[float]:
        """Each draft worker's peak resident memory, as read when the workers were last closed."""
        return [round(peak) for _, peak in sorted(self.pool.peak_rss_mib.items())]

    def __enter__(self) -> "SeedExecutor":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- the run

    def session(self) -> SeedSession:
        """SEED's verifier loop open to new requests (continuous batching across searches): a
        freed worker takes the next waiting request whichever search sent it, and with
        batched_verify the drafts of every search waiting in the queue share one target forward.
        One session at a time per executor."""
        self.options = self.options.validated()
        if self.pool.busy:  # a session left mid-request
            self.pool.close(graceful=False)
        session = SeedSession(self.pool, self.target, self.options, self.work)
        with session.guarded():
            self.start()
        return session

    def run(self, requests: list[GenerationRequest]) -> list[GenerationResult]:
        if not requests:
            return []
        check_requests(requests)
        session = self.session()
        results = drain(session, requests)
        self.last_events = session.events
        return results


def _named_draft(name: str, target: ModelRunner) -> NamedDraft:
    from seed_tot.models.loading import resolve_draft_dtype

    return NamedDraft(name, dtype=_dtype_name(resolve_draft_dtype("auto", target.dtype, target.device)))


def _dtype_name(dtype: torch.dtype) -> str:
    return {torch.float32: "float32", torch.bfloat16: "bfloat16", torch.float16: "float16"}.get(dtype, "auto")


def _describe(draft: DraftSource) -> str:
    return getattr(draft, "name", None) or repr(draft)
