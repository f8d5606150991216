"""The draft worker process of the SEED scheduler (one per parallel draft model).

A worker loads its draft model once, then serves requests assigned by the verifier (the
parent process). Per request it keeps a draft KV cache, drafts a token tree, hands it to
the verifier and waits for the verdict before drafting again (rounds-scheduled, the label
map gamma[i] of the paper's Algorithm 1 is "waiting for a Verdict").

Messages travel over one Pipe per worker (the verifier waits on all pipes and on the
process sentinels at once, so a dead worker is noticed immediately). The draft
distributions q (float32, vocabulary-sized) do not travel through the pipe: the worker
writes them into a shared-memory tensor that the verifier reads in place. The worker does
not touch that buffer again until its verdict arrives, so no copy or lock is needed.
"""

from __future__ import annotations

import hashlib
import logging
import logging.handlers
import os
import signal
import time
import traceback
from dataclasses import dataclass, field

import torch

from seed_tot.decoding.verify import Verdict as TreeVerdict
from seed_tot.runtime import ModelRunner
from seed_tot.scheduling.events import Event, now

log = logging.getLogger(__name__)


# ----------------------------------------------------------------------------- draft sources


@dataclass(frozen=True)
class NamedDraft:
    """A draft model that seed_tot.models.load_model can load by name (alias, dir, .gguf, hub id)."""

    name: str
    dtype: str = "auto"
    device: str = "cpu"
    cache_dir: str | None = None

    def load(self) -> ModelRunner:
        from seed_tot.models.loading import load_model

        return load_model(self.name, self.dtype, self.device, self.cache_dir)

    def load_tokenizer(self):
        """The tokenizer only (cheap), so the parent can check the pair before any process starts."""
        from seed_tot.models.loading import load_tokenizer

        return load_tokenizer(self.name, self.cache_dir)


@dataclass(frozen=True)
class TinyDraft:
    """The draft of seed_tot.models.tiny.build_tiny_pair with the same arguments (tests, smoke runs)."""

    seed: int = 0
    vocab_size: int | None = None
    dtype: str = "float32"
    noise: float | None = None  # draft weight noise; None: the default of build_tiny_pair
    device: str = "cpu"

    def _build(self):
        from seed_tot.models.tiny import build_tiny_pair

        extra = {} if self.noise is None else {"noise": self.noise}
        return build_tiny_pair(seed=self.seed, vocab_size=self.vocab_size, dtype=getattr(torch, self.dtype), **extra)

    def load(self) -> ModelRunner:
        draft, _, tokenizer = self._build()
        return ModelRunner(draft.to(self.device), tokenizer, name=f"tiny-draft(seed={self.seed}, vocab={self.vocab_size})")

    def load_tokenizer(self):
        from seed_tot.models.tiny import byte_tokenizer

        return None if self.vocab_size is not None else byte_tokenizer()


@dataclass(frozen=True)
class RandomDraft:
    """A random-weight model of a config.json's shape (seed_tot.models.random_init): benchmarks of
    real shapes on machines without the weights. Acceptance means nothing with random weights."""

    config_path: str
    seed: int = 0
    dtype: str = "bfloat16"
    device: str = "cpu"

    def load(self) -> ModelRunner:
        from seed_tot.models.random_init import random_model

        model = random_model(self.config_path, getattr(torch, self.dtype), self.device, self.seed)
        return ModelRunner(model, self.load_tokenizer(), name=f"random({self.config_path})")

    def load_tokenizer(self):
        from seed_tot.models.tiny import byte_tokenizer

        return byte_tokenizer()


DraftSource = NamedDraft | TinyDraft | RandomDraft


# ----------------------------------------------------------------------------- messages


@dataclass
class Ready:
    worker: int
    pid: int
    vocab_size: int
    model_name: str


@dataclass
class Start:
    """Serve a new request: prefill the prompt (all but its last token) and draft."""

    request: int
    prompt_ids: list[int]
    k_config: tuple[int, ...]
    temperature: float
    top_p: float
    seed: int


@dataclass
class Verdict:
    """The verifier's answer to a draft; `done` ends the request (no commit, cache dropped)."""

    request: int
    accepted_nodes: list[int]
    next_token: int
    done: bool
    k_config: tuple[int, ...]  # shape of the next draft (adaptive k may change it)


@dataclass
class Stop:
    pass


@dataclass
class Draft:
    """A drafted tree. Node i's q is row `q_rows[i]` of the worker's shared buffer."""

    worker: int
    request: int
    tokens: list[int]
    parents: list[int]
    q_rows: list[int]
    draft_forwards: int
    events: list[Event] = field(default_factory=list)

    @property
    def enqueued_at(self) -> float:
        return self.events[-1].time


@dataclass
class Failure:
    worker: int
    message: str
    details: str


# ----------------------------------------------------------------------------- helpers


def derive_seed(seed: int, stream: str) -> int:
    """An independent 63-bit seed per (request seed, purpose): drafting and verification
    use separate generators, so results do not depend on which process runs first."""
    digest = hashlib.sha256(f"{seed}:{stream}".encode()).digest()
    return int.from_bytes(digest[:8], "little") & ((1 << 63) - 1)


def tree_size(k_config: tuple[int, ...]) -> int:
    """Number of nodes of a k_config token tree: sum over levels of the product of widths."""
    total, width = 0, 1
    for k in k_config:
        width *= k
        total += width
    return total


def write_q_rows(buffer: torch.Tensor, draft_probs: list[torch.Tensor]) -> list[int]:
    """Copy each distinct q tensor (siblings share one) into the shared buffer; row per node."""
    rows: list[int] = []
    row_of: dict[int, int] = {}
    for q in draft_probs:
        key = id(q)
        if key not in row_of:
            row = len(row_of)
            if row >= buffer.shape[0]:
                raise RuntimeError(f"draft tree needs more than {buffer.shape[0]} q rows")
            if q.shape[-1] != buffer.shape[1]:
                raise RuntimeError(
                    f"draft vocabulary size {q.shape[-1]} differs from the target's {buffer.shape[1]}"
                )
            buffer[row].copy_(q)
            row_of[key] = row
        rows.append(row_of[key])
    return rows


@dataclass
class _Sequence:
    drafter: object  # DraftModelDrafter
    context: list[int]  # accepted tokens before `pending` (prompt included)
    pending: int
    tree: object = None  # the draft awaiting its verdict


class FaultInjection:
    """Test-only hook: "load" raises while loading; "draft:N" raises at the N-th draft;
    "hang:N" stops answering at the N-th draft (alive, silent, until terminated)."""

    def __init__(self, spec: str | None):
        self.spec = spec or ""
        self.drafts = 0

    def on_load(self) -> None:
        if self.spec == "load":
            raise RuntimeError("injected fault while loading the draft model")

    def on_draft(self) -> None:
        self.drafts += 1
        kind, _, n = self.spec.partition(":")
        if kind in ("draft", "hang") and self.drafts >= int(n):
            if kind == "hang":
                while True:
                    time.sleep(3600)
            raise RuntimeError(f"injected fault at draft {self.drafts}")


# ----------------------------------------------------------------------------- process body


def _setup_logging(log_queue, level: int) -> None:
    root = logging.getLogger()
    for handler in list(root.handlers):
        root.removeHandler(handler)
    if log_queue is not None:
        root.addHandler(logging.handlers.QueueHandler(log_queue))
    root.setLevel(level)


class _DraftServer:
    """Serves requests with one DraftModelDrafter (own KV cache + draft generator) per request."""

    def __init__(self, worker_id: int, draft: ModelRunner, q_buffer: torch.Tensor, conn, fault: FaultInjection):
        self.worker_id = worker_id
        self.draft = draft
        self.q_buffer = q_buffer
        self.conn = conn
        self.fault = fault
        self.sequences: dict[int, _Sequence] = {}

    def start(self, msg: Start) -> None:
        from seed_tot.decoding.drafters import DraftModelDrafter

        generator = torch.Generator().manual_seed(derive_seed(msg.seed, "draft"))
        drafter = DraftModelDrafter(self.draft, msg.k_config, msg.temperature, msg.top_p, generator)
        self.sequences[msg.request] = _Sequence(drafter, list(msg.prompt_ids[:-1]), msg.prompt_ids[-1])
        self.draft_and_send(msg.request, msg.k_config)

    def verdict(self, msg: Verdict) -> None:
        seq = self.sequences[msg.request]
        if msg.done:
            del self.sequences[msg.request]
            return
        accepted_tokens = [seq.tree.tokens[i] for i in msg.accepted_nodes]
        seq.drafter.observe(TreeVerdict(msg.accepted_nodes, accepted_tokens, msg.next_token))
        seq.context = seq.context + [seq.pending] + accepted_tokens
        seq.pending = msg.next_token
        self.draft_and_send(msg.request, msg.k_config)

    def draft_and_send(self, request: int, k_config: tuple[int, ...]) -> None:
        seq = self.sequences[request]
        self.fault.on_draft()
        events = [Event(now(), "draft_start", self.worker_id, request)]
        forwards_before = seq.drafter.forwards
        seq.drafter.k_config = tuple(k_config)
        tree = seq.drafter.propose(seq.context, seq.pending, max_depth=len(k_config))
        seq.tree = tree
        q_rows = write_q_rows(self.q_buffer, tree.draft_probs)
        events.append(Event(now(), "draft_end", self.worker_id, request))
        forwards = seq.drafter.forwards - forwards_before
        events.append(Event(now(), "enqueue", self.worker_id, request))
        self.conn.send(Draft(self.worker_id, request, list(tree.tokens), list(tree.parents), q_rows, forwards, events))


def worker_main(
    worker_id: int,
    source: DraftSource,
    conn,
    q_buffer: torch.Tensor,
    num_threads: int,
    log_queue,
    log_level: int,
    fault_spec: str | None,
) -> None:
    """Entry point of a spawned draft worker; returns when told to stop or the parent is gone."""
    # Ctrl-C reaches the whole process group: the parent handles it and stops the workers. The
    # parent started this process with SIGINT blocked (held_interrupts in seed/signals.py), so a
    # Ctrl-C while Python and torch were still importing could not kill it either; from here on it
    # is ignored.
    # So a worker never sees KeyboardInterrupt, and the broad except below never reports one.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    _setup_logging(log_queue, log_level)
    try:
        torch.set_num_threads(num_threads)
        fault = FaultInjection(fault_spec)
        fault.on_load()
        draft = source.load()
        log.info("draft worker %d (pid %d) loaded %s with %d thread(s)", worker_id, os.getpid(), draft.name, num_threads)
        conn.send(Ready(worker_id, os.getpid(), draft.vocab_size, draft.name))
        server = _DraftServer(worker_id, draft, q_buffer, conn, fault)
        while True:
            msg = conn.recv()
            if isinstance(msg, Stop):
                break
            if isinstance(msg, Start):
                server.start(msg)
            elif isinstance(msg, Verdict):
                server.verdict(msg)
    except (EOFError, BrokenPipeError, ConnectionResetError):
        pass  # the parent is gone: exit quietly instead of becoming an orphan
    except BaseException as exc:  # report everything, then exit
        message = f"{type(exc).__name__}: {exc}"
        try:
            conn.send(Failure(worker_id, message, traceback.format_exc()))
        except (OSError, EOFError):
            pass
    finally:
        conn.close()
