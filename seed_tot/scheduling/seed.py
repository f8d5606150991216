"""SEED: speculative scheduled execution with a rounds-scheduled strategy (Algorithm 1 of the paper).

n draft worker processes (seed_tot/scheduling/worker.py) draft in parallel, one request
each; their drafts enter a verify queue; this process, the verifier, owns the target model,
takes drafts first-come-first-served (or by another discipline), verifies them losslessly
(target_probs_for_tree + verify_tree), commits its per-request target cache and sends the
verdict back, after which that worker drafts again. Requests beyond n wait for a free worker.
A session (continuous batching) lets new requests join that waiting line between verify steps.

Every random choice of a request comes from generators seeded by the request's seed (one
for drafting in the worker, one for verification here), so results do not depend on the
schedule, the discipline, batching or the number of workers.
"""

from __future__ import annotations

import _thread
import logging
import logging.handlers
import signal
import threading
import time
import weakref
from collections import deque
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from multiprocessing.connection import wait as wait_for
from typing import Literal

import torch

from seed_tot.config import parse_k_config
from seed_tot.decoding.output import StopCriteria
from seed_tot.decoding.sampling import probabilities
from seed_tot.decoding.speculative import (
    commit_target,
    next_draft_depth,
    stop_criteria,
    target_probs_for_tree,
    tree_depth,
)
from seed_tot.decoding.verify import DraftTree, verify_tree
from seed_tot.errors import ConfigError, TokenizerMismatchError, WorkerError
from seed_tot.requests import (
    FinishReason,
    GenerationRequest,
    GenerationResult,
    GenerationStats,
)
from seed_tot.runtime import ModelRunner, cache_length, fork_cache, rollback
from seed_tot.runtime.cache import stack_left_padded, unstack_left_padded
from seed_tot.runtime.masks import batched_tree_inputs
from seed_tot.scheduling.events import TARGET, Event, now
from seed_tot.scheduling.session import DecodeSession, SessionWork, check_requests, drain
from seed_tot.scheduling.worker import (
    Draft,
    DraftSource,
    Failure,
    NamedDraft,
    Ready,
    Start,
    Stop,
    Verdict,
    derive_seed,
    tree_size,
    worker_main,
)

log = logging.getLogger(__name__)

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


# ----------------------------------------------------------------------------- worker pool


@dataclass
class _WorkerHandle:
    index: int
    process: object
    conn: object
    q_buffer: torch.Tensor
    request: int | None = None  # the request it serves now (None: free)


@contextmanager
def held_interrupts(reraise: bool = True):
    """Hold Ctrl-C (SIGINT) over a short critical section, then deliver it; none is lost.

    Inside, a SIGINT (or _thread.interrupt_main) is recorded instead of raising
    KeyboardInterrupt half-way through the section, and SIGINT stays blocked in this thread,
    so a child process started inside inherits it blocked (a draft worker cannot be killed by
    Ctrl-C before it ignores SIGINT). On exit the previous handler is restored and a held
    SIGINT is re-delivered to it: KeyboardInterrupt is raised right there (reraise=True), or on
    the main thread's next bytecode (reraise=False: for finalizers, which would swallow it).
    Outside the main thread (signal handlers run only there) it does nothing.
    """
    previous = signal.getsignal(signal.SIGINT) if threading.current_thread() is threading.main_thread() else None
    if previous is None:  # not the main thread, or a handler installed outside Python: leave it alone
        yield
        return
    held: list[int] = []
    signal.signal(signal.SIGINT, lambda signum, frame: held.append(signum))
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT}) if hasattr(signal, "pthread_sigmask") else None
    try:
        yield
    finally:
        if mask is not None:
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)  # a pending SIGINT reaches the recorder now
        signal.signal(signal.SIGINT, previous)  # runs the recorder for a tripped SIGINT first
        if held:
            if reraise or previous is signal.SIG_DFL:
                signal.raise_signal(signal.SIGINT)  # the previous handler runs before this returns
            else:
                _thread.interrupt_main(signal.SIGINT)


class _Pool:
    """The worker processes and the log listener.

    close() is idempotent, never raises and is never cut short: Ctrl-C during it is held until
    every worker is reaped and raised afterwards (see held_interrupts).
    """

    def __init__(self):
        self.workers: list[_WorkerHandle] = []
        self.listener: logging.handlers.QueueListener | None = None
        self.spawned_with: tuple = ()  # the options the workers were started with

    def close(self, graceful: bool = True, from_finalizer: bool = False) -> None:
        with held_interrupts(reraise=not from_finalizer):
            workers, self.workers = self.workers, []
            listener, self.listener = self.listener, None
            for worker in workers:
                if graceful and worker.process.is_alive():
                    try:
                        worker.conn.send(Stop())
                    except (OSError, ValueError):
                        pass
            for worker in workers:
                try:
                    _reap(worker, graceful)
                except Exception:  # keep closing the others
                    log.exception("could not stop draft worker %d (pid %s)", worker.index, worker.process.pid)
            if listener is not None:
                try:
                    listener.stop()
                except Exception:
                    log.exception("could not stop the worker log listener")


def _reap(worker: _WorkerHandle, graceful: bool) -> None:
    """Wait for a worker to exit (after Stop), else terminate it, else kill it; close its pipe."""
    worker.process.join(2.0 if graceful else 0.05)
    if worker.process.is_alive():
        worker.process.terminate()
        worker.process.join(2.0)
    if worker.process.is_alive():
        worker.process.kill()
        worker.process.join(2.0)
    worker.conn.close()


class _ParentLogDispatch(logging.Handler):
    """Re-emits a worker's log record through the parent's logger of the same name."""

    def emit(self, record: logging.LogRecord) -> None:
        logging.getLogger(record.name).handle(record)


# ----------------------------------------------------------------------------- per-request state


@dataclass
class _RequestState:
    index: int
    request: GenerationRequest
    stop: StopCriteria
    generator: torch.Generator
    depth: int
    cache: object = None
    prefix_len: int = 0  # accepted tokens in the target cache (the pending token excluded)
    pending: int = 0
    generated: list[int] = field(default_factory=list)
    finish_reason: FinishReason | None = None
    stats: GenerationStats = field(default_factory=GenerationStats)
    started_at: float = 0.0
    worker: int = -1

    @property
    def done(self) -> bool:
        return self.finish_reason is not None


class SeedExecutor:
    """The SEED executor: parallel draft processes, one verifier (this process) with the target.

    `draft` is a model name for seed_tot.models.load_model (loaded once by each worker, in the
    dtype resolve_draft_dtype picks) or a draft source from seed_tot.scheduling.worker (NamedDraft, TinyDraft).
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
        self._pool = _Pool()
        self._finalizer = weakref.finalize(self, self._pool.close, graceful=False, from_finalizer=True)

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
        return [w.process.pid for w in self._pool.workers]

    def start(self) -> None:
        """Spawn the draft workers and wait until each has loaded its model (done by run() on first use).

        Options may change between runs; a change the workers depend on (tree size of the shared q
        buffers, worker threads, fault injection) restarts them.
        """
        if self._pool.workers and not self._pool_fits():
            self._pool.close(graceful=True)
        if self._pool.workers:
            return
        try:
            self._spawn()
        except BaseException:
            self._pool.close(graceful=False)
            raise

    def _spawn_settings(self) -> tuple:
        return (tree_size(self.options.deepest_k_config()), self.options.worker_threads, self.options.inject_fault)

    def _pool_fits(self) -> bool:
        rows, threads, fault = self._spawn_settings()
        spawned_rows, spawned_threads, spawned_fault = self._pool.spawned_with
        return rows <= spawned_rows and threads == spawned_threads and fault == spawned_fault

    def _spawn(self) -> None:
        ctx = torch.multiprocessing.get_context("spawn")
        log_queue = ctx.Queue()
        self._pool.listener = logging.handlers.QueueListener(log_queue, _ParentLogDispatch())
        self._pool.listener.start()
        self._pool.spawned_with = self._spawn_settings()
        rows = tree_size(self.options.deepest_k_config())
        vocab = self.target.vocab_size
        for i in range(self.num_workers):
            parent_end, child_end = ctx.Pipe()
            q_buffer = torch.zeros(rows, vocab, dtype=torch.float32).share_memory_()
            process = ctx.Process(
                target=worker_main,
                args=(
                    i,
                    self.draft,
                    child_end,
                    q_buffer,
                    self.options.worker_threads,
                    log_queue,
                    logging.getLogger().getEffectiveLevel(),
                    self.options.inject_fault,
                ),
                name=f"seed-draft-{i}",
                daemon=True,
            )
            # Held Ctrl-C: the worker is in the pool the moment it exists (so it is reaped), and it
            # starts with SIGINT blocked (only this process handles Ctrl-C; see worker_main).
            with held_interrupts():
                process.start()
                self._pool.workers.append(_WorkerHandle(i, process, parent_end, q_buffer))
                child_end.close()
        deadline = time.monotonic() + self.options.start_timeout_s
        waiting = set(range(self.num_workers))
        while waiting:
            for msg in self._receive(deadline - time.monotonic(), only=waiting):
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
        self._pool.close(graceful=True)

    def __enter__(self) -> "SeedExecutor":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- messages

    def _receive(self, timeout: float, only: set[int] | None = None) -> list:
        """Block until at least one message arrives (or a worker dies); return every message ready."""
        workers = [w for w in self._pool.workers if only is None or w.index in only]
        if timeout <= 0:
            raise WorkerError("No message from the draft workers within the time limit; check the worker logs.")
        conns = {w.conn: w for w in workers}
        sentinels = {w.process.sentinel: w for w in workers}
        ready = wait_for(list(conns) + list(sentinels), timeout)
        if not ready:
            raise WorkerError(
                f"No message from the draft workers for {timeout:.0f} s; check the worker logs or raise the timeout."
            )
        messages = []
        for item in ready:
            worker = conns.get(item) or sentinels[item]
            messages += self._drain(worker)
        return messages

    def _drain(self, worker: _WorkerHandle) -> list:
        messages = []
        try:
            while worker.conn.poll():
                msg = worker.conn.recv()
                if isinstance(msg, Failure):
                    raise WorkerError(f"Draft worker {msg.worker} failed: {msg.message}")
                messages.append(msg)
        except (EOFError, OSError):
            pass
        if not messages and not worker.process.is_alive():
            raise self._death_error(worker)
        return messages

    def _send(self, worker: _WorkerHandle, message) -> None:
        try:
            worker.conn.send(message)
        except (OSError, ValueError):
            raise self._death_error(worker) from None

    @staticmethod
    def _death_error(worker: _WorkerHandle) -> WorkerError:
        worker.process.join(2.0)
        code = worker.process.exitcode
        if code is None:
            how = "stopped answering (its pipe is closed)"
        elif code < 0:
            how = f"was killed by signal {-code}"
        else:
            how = f"exited with code {code}"
        return WorkerError(f"Draft worker {worker.index} (pid {worker.process.pid}) {how}; the SEED run was aborted.")

    # -- the run

    def session(self) -> "_SeedSession":
        """SEED's verifier loop open to new requests (continuous batching across searches): a
        freed worker takes the next waiting request whichever search sent it, and with
        batched_verify the drafts of every search waiting in the queue share one target forward.
        One session at a time per executor."""
        return _SeedSession(self)

    def run(self, requests: list[GenerationRequest]) -> list[GenerationResult]:
        if not requests:
            return []
        check_requests(requests)
        session = self.session()
        results = drain(session, requests)
        self.last_events = session.events
        return results


class _SeedSession(DecodeSession[_RequestState]):
    """The verifier loop of Algorithm 1; requests join the waiting line between steps.

    A step verifies the drafts in the queue (the head, or all of them with batched_verify),
    sends the verdicts and hands each freed worker the next waiting request. Rows are the
    requests not yet ended, whether a worker drafts for them or they still wait for one.
    Any error or Ctrl-C stops every worker (their caches may be stale); the next session respawns.
    """

    def __init__(self, executor: SeedExecutor):
        super().__init__(executor.work, executor.target)
        executor.options = executor.options.validated()
        self.ex = executor
        self.opts = executor.options
        self.target = executor.target
        self.events: list[Event] = []
        self.states: dict[int, _RequestState] = {}  # by ticket; ended requests leave
        self.todo: deque[int] = deque()  # tickets waiting for a worker
        self.queue: list[Draft] = []  # the verify queue Q
        self.prompt_caches: dict[tuple[int, ...], object] = {}
        self.last_served = -1
        if any(w.request is not None for w in executor._pool.workers):  # a session left mid-request
            executor._pool.close(graceful=False)
        with self._guarded():
            executor.start()

    @contextmanager
    def _guarded(self):
        """The target's thread count while the verifier works; on any error stop the workers."""
        old_threads = torch.get_num_threads()
        try:
            if self.opts.target_threads is not None:
                torch.set_num_threads(self.opts.target_threads)
            yield
        except BaseException:
            self.ex._pool.close(graceful=False)
            raise
        finally:
            torch.set_num_threads(old_threads)

    def step(self) -> list[tuple[int, GenerationResult]]:
        with self._guarded():
            return super().step()

    def take_events(self, tickets: list[int]) -> list[Event]:
        """The scheduler events of these requests, numbered by their position in `tickets`."""
        position = {ticket: i for i, ticket in enumerate(tickets)}
        taken = [replace(e, request=position[e.request]) for e in self.events if e.request in position]
        self.events = [e for e in self.events if e.request not in position]
        return taken

    def _join(self, queued: list[tuple[int, GenerationRequest]]) -> None:
        for ticket, request in queued:
            state = self._new_state(ticket, request)
            self.states[ticket] = state
            self.active.append(state)
            self.todo.append(ticket)
        # Send every free worker its request before prefilling any target cache, so that
        # the workers prefill and draft while the target prefills.
        free = [w for w in self.ex._pool.workers if w.request is None]
        for state in [self._assign(worker) for worker in free]:
            if state is not None:
                self._prefill(state)
        self._forget_prompts_nobody_waits_for()

    def _step(self) -> list[tuple[int, GenerationResult]]:
        while not self.queue:
            self._collect(self.opts.stall_timeout_s)
        self._collect_ready()
        started = time.perf_counter()
        ended = self._verify(self._pick())
        self.target_seconds += time.perf_counter() - started
        self.active = [s for s in self.active if not s.done]
        return [(state.index, self._result(state)) for state in ended]

    def _new_state(self, index: int, request: GenerationRequest) -> _RequestState:
        return _RequestState(
            index=index,
            request=request,
            stop=stop_criteria(self.target, request.config),
            generator=torch.Generator().manual_seed(derive_seed(request.seed, "verify")),
            depth=len(self.opts.k_config),
        )

    # -- assignment and target prefill

    def _k_config_for(self, state: _RequestState) -> tuple[int, ...]:
        remaining = state.request.config.max_new_tokens - len(state.generated)
        # A round emits up to depth + 1 tokens; deeper drafts than the budget are wasted.
        return shaped_k_config(self.opts.k_config, min(state.depth, max(remaining - 1, 0)))

    def _assign(self, worker: _WorkerHandle) -> _RequestState | None:
        """Send the worker the next waiting request (the caller prefills its target cache)."""
        worker.request = None
        if not self.todo:
            return None
        state = self.states[self.todo.popleft()]
        state.worker, worker.request, state.started_at = worker.index, state.index, time.perf_counter()
        cfg = state.request.config
        self.ex._send(
            worker,
            Start(state.index, list(state.request.prompt_ids), self._k_config_for(state), cfg.temperature, cfg.top_p, state.request.seed)
        )
        return state

    def _prefill(self, state: _RequestState) -> None:
        prompt = [int(t) for t in state.request.prompt_ids]
        context = tuple(prompt[:-1])
        state.prefix_len, state.pending = len(context), prompt[-1]
        if self.opts.share_prefix and context in self.prompt_caches:
            state.cache = fork_cache(self.prompt_caches[context])
            return
        self.events.append(Event(now(), "prefill_start", TARGET, state.index))
        cache = self.target.new_cache()
        if context:
            self.target.forward(torch.tensor([list(context)]), cache, logits_to_keep=1)
            state.stats.target_forwards += 1
        self.events.append(Event(now(), "prefill_end", TARGET, state.index))
        if self.opts.share_prefix:
            self.prompt_caches[context] = cache
            state.cache = fork_cache(cache)
        else:
            state.cache = cache

    def _forget_prompts_nobody_waits_for(self) -> None:
        """Keep a prompt's cache only while a waiting request has that prompt (bounds a long session)."""
        waiting = {tuple(int(t) for t in self.states[ticket].request.prompt_ids[:-1]) for ticket in self.todo}
        self.prompt_caches = {c: cache for c, cache in self.prompt_caches.items() if c in waiting}

    # -- the verify queue

    def _collect(self, timeout: float) -> None:
        for msg in self.ex._receive(timeout):
            self._enqueue(msg)

    def _collect_ready(self) -> None:
        """Move every draft already sent into the queue (non-blocking)."""
        for worker in self.ex._pool.workers:
            if worker.conn.poll():
                for msg in self.ex._drain(worker):
                    self._enqueue(msg)

    def _enqueue(self, msg) -> None:
        if not isinstance(msg, Draft):
            raise WorkerError(f"Unexpected message {type(msg).__name__} from a draft worker.")
        self.events.extend(msg.events)
        self.queue.append(msg)

    def _pick(self) -> list[Draft]:
        """Order the queue by the discipline; take the head, or everything when batching."""
        if self.opts.discipline == "fcfs":
            self.queue.sort(key=lambda d: d.enqueued_at)
        else:  # round-robin: the next worker after the one served last
            n = len(self.ex._pool.workers)
            self.queue.sort(key=lambda d: ((d.worker - self.last_served - 1) % n, d.enqueued_at))
        take = len(self.queue) if self.opts.batched_verify else 1
        batch, self.queue = self.queue[:take], self.queue[take:]
        self.last_served = batch[-1].worker
        return batch

    # -- verification

    def _tree(self, draft: Draft) -> DraftTree:
        buffer = self.ex._pool.workers[draft.worker].q_buffer
        return DraftTree(list(draft.tokens), list(draft.parents), [buffer[row] for row in draft.q_rows])

    def _verify(self, batch: list[Draft]) -> list[_RequestState]:
        """Verify `batch`, send the verdicts, start waiting requests on freed workers; the ended states."""
        states = [self.states[d.request] for d in batch]
        trees = [self._tree(d) for d in batch]
        started = now()
        for d in batch:
            self.events.append(Event(started, "verify_start", d.worker, d.request))
        if len(batch) > 1 and all(cache_length(s.cache) > 0 for s in states):
            probs = self._batched_target_probs(states, trees)
        else:
            probs = []
            for state, tree in zip(states, trees):
                cfg = state.request.config
                probs.append(
                    target_probs_for_tree(self.target, state.cache, state.pending, tree, cfg.temperature, cfg.top_p)
                )
        verdicts = []
        for draft, state, tree, p in zip(batch, states, trees, probs):
            verdicts.append(self._apply(draft, state, tree, p))
        verified_at = now()
        for draft, verdict in zip(batch, verdicts):
            self.events.append(Event(verified_at, "verify_end", draft.worker, draft.request))
            self.events.append(Event(verified_at, "accepted", draft.worker, draft.request, len(verdict.accepted_nodes)))
        for draft, verdict in zip(batch, verdicts):
            worker = self.ex._pool.workers[draft.worker]
            self.ex._send(worker, verdict)
            if verdict.done:
                state = self._assign(worker)
                if state is not None:
                    self._prefill(state)  # overlaps with the worker's first draft
        self._forget_prompts_nobody_waits_for()
        ended = [state for state, verdict in zip(states, verdicts) if verdict.done]
        for state in ended:
            del self.states[state.index]
        return ended

    def _batched_target_probs(self, states: list[_RequestState], trees: list[DraftTree]) -> list[torch.Tensor]:
        """One target forward over every row's [pending] + tree, on left-padded stacked caches."""
        stacked, pads = stack_left_padded([s.cache for s in states])
        parents = [[-1] + [p + 1 for p in tree.parents] for tree in trees]
        width = max(len(p) for p in parents)
        pad_id = self.target.pad_token_id
        ids = [[s.pending] + tree.tokens + [pad_id] * (width - 1 - len(tree)) for s, tree in zip(states, trees)]
        mask, positions = batched_tree_inputs(parents, [cache_length(s.cache) for s in states], self.target.dtype)
        logits = self.target.forward(torch.tensor(ids), stacked, position_ids=positions, attention_mask=mask)
        for state, single in zip(states, unstack_left_padded(stacked, pads)):
            state.cache = single  # holds prefix + the padded tree; commit_target trims it
        out = []
        for row, (state, tree) in enumerate(zip(states, trees)):
            cfg = state.request.config
            out.append(probabilities(logits[row, : 1 + len(tree)], cfg.temperature, cfg.top_p))
        return out

    def _apply(self, draft: Draft, state: _RequestState, tree: DraftTree, probs: torch.Tensor) -> Verdict:
        verdict = verify_tree(tree, probs, state.generator)
        stats = state.stats
        stats.target_forwards += 1
        stats.draft_forwards += draft.draft_forwards
        stats.draft_tokens_proposed += tree_depth(tree)
        stats.draft_tokens_accepted += len(verdict.accepted_tokens)
        start = len(state.generated)
        state.generated += verdict.accepted_tokens + [verdict.next_token]
        stopped = state.stop.first_stop(state.generated, start)
        if stopped is not None:
            keep, state.finish_reason = stopped
            state.generated = state.generated[:keep]
            state.cache = None
            state.stats.wall_seconds = time.perf_counter() - state.started_at
            return Verdict(state.index, verdict.accepted_nodes, verdict.next_token, True, ())
        self._commit(state, tree, verdict.accepted_nodes)
        state.pending = verdict.next_token
        if self.opts.adaptive_k:
            state.depth = next_draft_depth(state.depth, tree_depth(tree), len(verdict.accepted_nodes), self.opts.max_depth)
        return Verdict(state.index, verdict.accepted_nodes, verdict.next_token, False, self._k_config_for(state))

    def _commit(self, state: _RequestState, tree: DraftTree, accepted_nodes: list[int]) -> None:
        expected = state.prefix_len + 1 + len(tree)
        if cache_length(state.cache) > expected:  # batched rows carry pad queries at the end
            rollback(state.cache, expected)
        commit_target(state.cache, state.prefix_len, tree, accepted_nodes)
        state.prefix_len += 1 + len(accepted_nodes)

    def _result(self, state: _RequestState) -> GenerationResult:
        state.stats.new_tokens = len(state.generated)
        return GenerationResult(
            request_id=state.request.request_id or str(state.index),
            token_ids=list(state.generated),
            text=self.target.decode(state.generated),
            finish_reason=state.finish_reason,
            stats=state.stats,
        )


def _named_draft(name: str, target: ModelRunner) -> NamedDraft:
    from seed_tot.models.loading import resolve_draft_dtype

    return NamedDraft(name, dtype=_dtype_name(resolve_draft_dtype("auto", target.dtype, target.device)))


def _dtype_name(dtype: torch.dtype) -> str:
    return {torch.float32: "float32", torch.bfloat16: "bfloat16", torch.float16: "float16"}.get(dtype, "auto")


def _describe(draft: DraftSource) -> str:
    return getattr(draft, "name", None) or repr(draft)
