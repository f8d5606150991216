"""The draft worker processes of a SEED executor: spawning them, messages to and from them,
and reaping them on every exit path (no orphan process, Ctrl-C never cuts a close short)."""

from __future__ import annotations

import logging
import logging.handlers
from dataclasses import dataclass
from multiprocessing.connection import wait as wait_for

import torch

from seed_tot.errors import WorkerError
from seed_tot.scheduling.seed.logs import ParentLogDispatch
from seed_tot.scheduling.seed.signals import held_interrupts
from seed_tot.scheduling.seed.worker import DraftSource, Failure, Stop, worker_main

log = logging.getLogger(__name__)


@dataclass
class WorkerHandle:
    index: int
    process: object
    conn: object
    q_buffer: torch.Tensor
    request: int | None = None  # the request it serves now (None: free)


def worker_peak_mib(worker: WorkerHandle) -> float:
    """A live worker's peak resident memory (0 once it has exited)."""
    from seed_tot.machine_facts import child_peak_rss_mib

    try:
        return child_peak_rss_mib(worker.process.pid)
    except (OSError, ValueError, TypeError):
        return 0.0


class WorkerPool:
    """The draft worker processes, their pipes and shared q buffers, and the log listener.

    close() is idempotent, never raises and is never cut short: Ctrl-C during it is held until
    every worker is reaped and raised afterwards (see held_interrupts).
    """

    def __init__(self):
        self.workers: list[WorkerHandle] = []
        self.listener: logging.handlers.QueueListener | None = None
        self.spawned_with: tuple = ()  # the options the workers were started with
        self.peak_rss_mib: dict[int, float] = {}  # each worker's peak resident memory, read when it is closed

    def close(self, graceful: bool = True, from_finalizer: bool = False) -> None:
        with held_interrupts(reraise=not from_finalizer):
            workers, self.workers = self.workers, []
            listener, self.listener = self.listener, None
            for worker in workers:
                self.peak_rss_mib[worker.index] = max(self.peak_rss_mib.get(worker.index, 0.0), worker_peak_mib(worker))
                if graceful and worker.process.is_alive():
                    try:
                        worker.conn.send(Stop())
                    except (OSError, ValueError):
                        pass
            for worker in workers:
                try:
                    reap(worker, graceful)
                except Exception:  # keep closing the others
                    log.exception("could not stop draft worker %d (pid %s)", worker.index, worker.process.pid)
            if listener is not None:
                try:
                    listener.stop()
                except Exception:
                    log.exception("could not stop the worker log listener")

    def spawn(self, count: int, draft: DraftSource, rows: int, vocab: int, options, settings: tuple) -> None:
        """Start `count` draft worker processes (each with a rows x vocab shared q buffer) and the
        listener that forwards their logs; it does not wait for them to load their model."""
        ctx = torch.multiprocessing.get_context("spawn")
        log_queue = ctx.Queue()
        self.listener = logging.handlers.QueueListener(log_queue, ParentLogDispatch())
        self.listener.start()
        self.spawned_with = settings
        for i in range(count):
            parent_end, child_end = ctx.Pipe()
            q_buffer = torch.zeros(rows, vocab, dtype=torch.float32).share_memory_()
            process = ctx.Process(
                target=worker_main,
                args=(
                    i,
                    draft,
                    child_end,
                    q_buffer,
                    options.worker_threads,
                    log_queue,
                    logging.getLogger().getEffectiveLevel(),
                    options.inject_fault,
                ),
                name=f"seed-draft-{i}",
                daemon=True,
            )
            # Held Ctrl-C: the worker is in the pool the moment it exists (so it is reaped), and it
            # starts with SIGINT blocked (only this process handles Ctrl-C; see worker_main).
            with held_interrupts():
                process.start()
                self.workers.append(WorkerHandle(i, process, parent_end, q_buffer))
                child_end.close()

    @property
    def busy(self) -> bool:
        """Whether a worker is still serving a request (a session was left mid-request)."""
        return any(w.request is not None for w in self.workers)

    def free_workers(self) -> list[WorkerHandle]:
        return [w for w in self.workers if w.request is None]

    def ready_messages(self) -> list:
        """Every message the workers have already sent (non-blocking)."""
        messages = []
        for worker in self.workers:
            if worker.conn.poll():
                messages += self.drain(worker)
        return messages

    def receive(self, timeout: float, only: set[int] | None = None) -> list:
        """Block until at least one message arrives (or a worker dies); return every message ready."""
        workers = [w for w in self.workers if only is None or w.index in only]
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
            messages += self.drain(worker)
        return messages

    def drain(self, worker: WorkerHandle) -> list:
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
            raise death_error(worker)
        return messages

    def send(self, worker: WorkerHandle, message) -> None:
        try:
            worker.conn.send(message)
        except (OSError, ValueError):
            raise death_error(worker) from None


def reap(worker: WorkerHandle, graceful: bool) -> None:
    """Wait for a worker to exit (after Stop), else terminate it, else kill it; close its pipe."""
    worker.process.join(2.0 if graceful else 0.05)
    if worker.process.is_alive():
        worker.process.terminate()
        worker.process.join(2.0)
    if worker.process.is_alive():
        worker.process.kill()
        worker.process.join(2.0)
    worker.conn.close()


def death_error(worker: WorkerHandle) -> WorkerError:
    worker.process.join(2.0)
    code = worker.process.exitcode
    if code is None:
        how = "stopped answering (its pipe is closed)"
    elif code < 0:
        how = f"was killed by signal {-code}"
    else:
        how = f"exited with code {code}"
    return WorkerError(f"Draft worker {worker.index} (pid {worker.process.pid}) {how}; the SEED run was aborted.")
