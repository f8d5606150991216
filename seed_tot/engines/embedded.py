"""Start and stop llama.cpp's server (from the `xllamacpp` wheel) on 127.0.0.1 for one run.

The server runs in a child process (seed_tot/engines/llama_process.py) so that a stop is a
process exit: `close()` closes the child's stdin and terminates it, and a parent that dies
closes the pipe too, so no server outlives the run.
"""

from __future__ import annotations

import importlib
import os
import select
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from seed_tot.errors import EngineError

READY_TIMEOUT_S = 300.0  # loading a 1.5B GGUF takes seconds; a busy shared machine may take longer


@dataclass(frozen=True)
class LlamaServerSettings:
    model: str
    draft: str | None = None
    slots: int = 4
    ctx_per_slot: int = 4096
    threads: int | None = None
    draft_max: int = 8
    port: int = 0  # 0: a free port


def default_threads() -> int:
    """The cores this process may run on: llama.cpp's threads wait for each other at every
    operation, so more threads than cores stall it. A busy machine may run faster with fewer
    (measured: docs/engines.md#options-of-the-engine-methods); that is --threads, never a guess from the load average, which lags a
    minute behind and once started a server with 1 thread on an idle 2-core machine."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def check_installed() -> None:
    try:
        importlib.import_module("xllamacpp")
    except ImportError:
        raise EngineError(
            "llama.cpp is not installed: run `pip install xllamacpp==2026.10.11549` (or reinstall seed-tot), "
            "or choose an in-process method such as --method batched-lookup."
        ) from None


def _command(settings: LlamaServerSettings, port: int) -> list[str]:
    command = [
        sys.executable, "-m", "seed_tot.engines.llama_process", "--model", settings.model, "--port", str(port),
        "--slots", str(settings.slots), "--ctx-per-slot", str(settings.ctx_per_slot),
    ]
    if settings.threads:
        command += ["--threads", str(settings.threads)]
    if settings.draft:
        command += ["--draft", settings.draft, "--draft-max", str(settings.draft_max)]
    return command


class LlamaServer:
    """A llama.cpp server child process; `url` once started. Use as a context manager or call close()."""

    def __init__(self, settings: LlamaServerSettings):
        check_installed()
        for path in filter(None, (settings.model, settings.draft)):
            if not Path(path).is_file():
                raise EngineError(f"GGUF file {path} does not exist: run `seed-tot models pull` or check the path.")
        self.settings = settings
        self.log_path = Path(tempfile.mkstemp(prefix="seed-tot-llama-", suffix=".log")[1])
        self._log = open(self.log_path, "wb")
        self.process = subprocess.Popen(
            _command(settings, settings.port or free_port()), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log,
        )
        self.url = self._wait_ready()

    def _wait_ready(self) -> str:
        deadline = time.monotonic() + READY_TIMEOUT_S
        reason = "it did not start within {:.0f} s".format(READY_TIMEOUT_S)
        while time.monotonic() < deadline:
            readable, _, _ = select.select([self.process.stdout], [], [], 0.5)
            if readable:
                line = self.process.stdout.readline().decode().strip()
                if line.startswith("READY "):
                    return line.split(" ", 1)[1]
                if not line:  # end of output: the child exited
                    reason = self._last_log_error()
                    break
            elif self.process.poll() is not None:
                reason = self._last_log_error()
                break
        self.close()
        raise EngineError(f"llama.cpp's server did not start ({reason}): check the GGUF file {self.settings.model}.")

    def _last_log_error(self) -> str:
        try:
            lines = self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return "no log"
        errors = [line.split(":", 1)[-1].strip() for line in lines if " E " in line or "Error" in line]
        return (errors[-1] if errors else (lines[-1] if lines else "no output"))[:200]

    @property
    def pid(self) -> int:
        return self.process.pid

    def close(self) -> None:
        if self.process.poll() is None:
            try:
                self.process.stdin.close()
            except OSError:
                pass
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        for stream in (self.process.stdin, self.process.stdout):
            if stream is not None and not stream.closed:
                stream.close()
        if not self._log.closed:
            self._log.close()
            if os.environ.get("SEED_TOT_KEEP_LLAMA_LOG") is None:
                self.log_path.unlink(missing_ok=True)

    def __enter__(self) -> "LlamaServer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
