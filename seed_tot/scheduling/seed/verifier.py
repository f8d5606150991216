"""SEED's verifier loop (Algorithm 1) as a continuous-batching session: the verify queue, the
target's per-request caches, lossless verification, and handing freed workers the next request."""

from __future__ import annotations

import time
from collections import deque
from contextlib import contextmanager
from dataclasses import dataclass, field, replace

import torch

from seed_tot.decoding.sampling import probabilities
from seed_tot.decoding.speculative import (
    commit_target,
    next_draft_depth,
    target_probs_for_tree,
    tree_depth,
)
from seed_tot.decoding.token_sink import TokenSink
from seed_tot.decoding.verify import DraftTree, verify_tree
from seed_tot.errors import WorkerError
from seed_tot.requests import GenerationRequest, GenerationResult, GenerationStats
from seed_tot.runtime import ModelRunner, cache_length, fork_cache, rollback
from seed_tot.runtime.cache import stack_left_padded, unstack_left_padded
from seed_tot.runtime.masks import batched_tree_inputs
from seed_tot.scheduling.events import TARGET, Event, now
from seed_tot.scheduling.seed.options import SeedOptions, shaped_k_config
from seed_tot.scheduling.seed.pool import WorkerHandle, WorkerPool
from seed_tot.scheduling.seed.worker import Draft, Start, Verdict, derive_seed
from seed_tot.scheduling.session import DecodeSession, SessionWork


@dataclass
class RequestState:
    index: int
    request: GenerationRequest
    sink: TokenSink  # the tokens generated so far, and whether and why they ended
    generator: torch.Generator
    depth: int
    cache: object = None
    prefix_len: int = 0  # accepted tokens in the target cache (the pending token excluded)
    pending: int = 0
    stats: GenerationStats = field(default_factory=GenerationStats)
    started_at: float = 0.0
    worker: int = -1

    @property
    def done(self) -> bool:
        return self.sink.finished

    @property
    def ticket(self) -> int:
        return self.index


class SeedSession(DecodeSession[RequestState]):
    """The verifier loop of Algorithm 1; requests join the waiting line between steps.

    A step verifies the drafts in the queue (the head, or all of them with batched_verify),
    sends the verdicts and hands each freed worker the next waiting request. Rows are the
    requests not yet ended, whether a worker drafts for them or they still wait for one.
    Any error or Ctrl-C stops every worker (their caches may be stale); the next session respawns.
    """

    def __init__(self, pool: WorkerPool, target: ModelRunner, options: SeedOptions, work: SessionWork):
        super().__init__(work, target)
        self.pool = pool
        self.opts = options
        self.target = target
        self.events: list[Event] = []
        self.states: dict[int, RequestState] = {}  # by ticket; ended requests leave
        self.todo: deque[int] = deque()  # tickets waiting for a worker
        self.queue: list[Draft] = []  # the verify queue Q
        self.prompt_caches: dict[tuple[int, ...], object] = {}
        self.last_served = -1
        self.dropped: set[int] = set()  # cancelled tickets whose worker has not yet sent its last draft

    @contextmanager
    def guarded(self):
        """The target's thread count while the verifier works; on any error stop the workers."""
        old_threads = torch.get_num_threads()
        try:
            if self.opts.target_threads is not None:
                torch.set_num_threads(self.opts.target_threads)
            yield
        except BaseException:
            self.pool.close(graceful=False)
            raise
        finally:
            torch.set_num_threads(old_threads)

    def step(self) -> list[tuple[int, GenerationResult]]:
        with self.guarded():
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
        free = self.pool.free_workers()
        for state in [self._assign(worker) for worker in free]:
            if state is not None:
                self._prefill(state)
        self._forget_prompts_nobody_waits_for()

    def _remove(self, tickets: set[int]) -> None:
        """Forget the cancelled requests; a worker drafting for one is freed by its next draft,
        which is never verified."""
        removed = [s for s in self.active if s.index in tickets]
        self.active = [s for s in self.active if s.index not in tickets]
        self.todo = deque(t for t in self.todo if t not in tickets)
        self.events = [e for e in self.events if e.request not in tickets]
        for state in removed:
            del self.states[state.index]
            if state.worker >= 0:
                self.dropped.add(state.index)
        for draft in [d for d in self.queue if d.request in self.dropped]:
            self.queue.remove(draft)
            self._release(draft)
        self._forget_prompts_nobody_waits_for()

    def _release(self, draft: Draft) -> None:
        """End a cancelled request on its worker and hand the worker the next waiting request."""
        self.dropped.discard(draft.request)
        worker = self.pool.workers[draft.worker]
        self.pool.send(worker, Verdict(draft.request, [], 0, True, ()))
        state = self._assign(worker)
        if state is not None:
            self._prefill(state)

    def _step(self) -> list[tuple[int, GenerationResult]]:
        while not self.queue:
            self._collect(self.opts.stall_timeout_s)
        self._collect_ready()
        started = time.perf_counter()
        ended = self._verify(self._pick())
        self.target_seconds += time.perf_counter() - started
        self.active = [s for s in self.active if not s.done]
        return [(state.index, self._result(state)) for state in ended]

    def _new_state(self, index: int, request: GenerationRequest) -> RequestState:
        return RequestState(
            index=index,
            request=request,
            sink=TokenSink.of(self.target, request.config),
            generator=torch.Generator().manual_seed(derive_seed(request.seed, "verify")),
            depth=len(self.opts.k_config),
        )

    # -- assignment and target prefill

    def _k_config_for(self, state: RequestState) -> tuple[int, ...]:
        # A round emits up to depth + 1 tokens; deeper drafts than the budget are wasted.
        return shaped_k_config(self.opts.k_config, min(state.depth, max(state.sink.remaining - 1, 0)))

    def _assign(self, worker: WorkerHandle) -> RequestState | None:
        """Send the worker the next waiting request (the caller prefills its target cache)."""
        worker.request = None
        if not self.todo:
            return None
        state = self.states[self.todo.popleft()]
        state.worker, worker.request, state.started_at = worker.index, state.index, time.perf_counter()
        cfg = state.request.config
        self.pool.send(
            worker,
            Start(state.index, list(state.request.prompt_ids), self._k_config_for(state), cfg.temperature, cfg.top_p, state.request.seed)
        )
        return state

    def _prefill(self, state: RequestState) -> None:
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
        for msg in self.pool.receive(timeout):
            self._enqueue(msg)

    def _collect_ready(self) -> None:
        """Move every draft already sent into the queue (non-blocking)."""
        for msg in self.pool.ready_messages():
            self._enqueue(msg)

    def _enqueue(self, msg) -> None:
        if not isinstance(msg, Draft):
            raise WorkerError(f"Unexpected message {type(msg).__name__} from a draft worker.")
        if msg.request in self.dropped:
            self._release(msg)
            return
        self.events.extend(msg.events)
        self.queue.append(msg)

    def _pick(self) -> list[Draft]:
        """Order the queue by the discipline; take the head, or everything when batching."""
        if self.opts.discipline == "fcfs":
            self.queue.sort(key=lambda d: d.enqueued_at)
        else:  # round-robin: the next worker after the one served last
            n = len(self.pool.workers)
            self.queue.sort(key=lambda d: ((d.worker - self.last_served - 1) % n, d.enqueued_at))
        take = len(self.queue) if self.opts.batched_verify else 1
        batch, self.queue = self.queue[:take], self.queue[take:]
        self.last_served = batch[-1].worker
        return batch

    # -- verification

    def _tree(self, draft: Draft) -> DraftTree:
        buffer = self.pool.workers[draft.worker].q_buffer
        return DraftTree(list(draft.tokens), list(draft.parents), [buffer[row] for row in draft.q_rows])

    def _verify(self, batch: list[Draft]) -> list[RequestState]:
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
            worker = self.pool.workers[draft.worker]
            self.pool.send(worker, verdict)
            if verdict.done:
                state = self._assign(worker)
                if state is not None:
                    self._prefill(state)  # overlaps with the worker's first draft
        self._forget_prompts_nobody_waits_for()
        ended = [state for state, verdict in zip(states, verdicts) if verdict.done]
        for state in ended:
            del self.states[state.index]
        return ended

    def _batched_target_probs(self, states: list[RequestState], trees: list[DraftTree]) -> list[torch.Tensor]:
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

    def _apply(self, draft: Draft, state: RequestState, tree: DraftTree, probs: torch.Tensor) -> Verdict:
        verdict = verify_tree(tree, probs, state.generator)
        stats = state.stats
        stats.target_forwards += 1
        stats.draft_forwards += draft.draft_forwards
        stats.draft_tokens_proposed += tree_depth(tree)
        stats.draft_tokens_accepted += len(verdict.accepted_tokens)
        if state.sink.extend(verdict.accepted_tokens + [verdict.next_token]):
            state.cache = None
            state.stats.wall_seconds = time.perf_counter() - state.started_at
            return Verdict(state.index, verdict.accepted_nodes, verdict.next_token, True, ())
        self._commit(state, tree, verdict.accepted_nodes)
        state.pending = verdict.next_token
        if self.opts.adaptive_k:
            state.depth = next_draft_depth(state.depth, tree_depth(tree), len(verdict.accepted_nodes), self.opts.max_depth)
        return Verdict(state.index, verdict.accepted_nodes, verdict.next_token, False, self._k_config_for(state))

    def _commit(self, state: RequestState, tree: DraftTree, accepted_nodes: list[int]) -> None:
        expected = state.prefix_len + 1 + len(tree)
        if cache_length(state.cache) > expected:  # batched rows carry pad queries at the end
            rollback(state.cache, expected)
        commit_target(state.cache, state.prefix_len, tree, accepted_nodes)
        state.prefix_len += 1 + len(accepted_nodes)

    def _result(self, state: RequestState) -> GenerationResult:
        tokens = state.sink.token_ids
        state.stats.new_tokens = len(tokens)
        return GenerationResult(
            request_id=state.request.request_id or str(state.index),
            token_ids=list(tokens),
            text=self.target.decode(tokens),
            finish_reason=state.sink.finish_reason,
            stats=state.stats,
        )
