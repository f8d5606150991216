"""Run the app under uvicorn: in the foreground (the CLI; Ctrl-C / SIGTERM stop it cleanly) or on
a background thread (tests, notebooks)."""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import uvicorn

from seed_tot.cli.api_server.app import create_app
from seed_tot.cli.api_server.service import ApiService


def _config(service: ApiService, host: str, port: int, api_key: str | None, shutdown_timeout: float,
            log_level: str) -> uvicorn.Config:
    app = create_app(service, api_key)
    return uvicorn.Config(app, host=host, port=port, log_level=log_level, lifespan="off",
                          timeout_graceful_shutdown=shutdown_timeout)


FORCE_SECONDS = 3.0  # after a second Ctrl-C (or the drain's end), how long a clean exit may take before a hard one
KILL_SECONDS = 4.5  # after a second Ctrl-C (or the drain's end), when the watchdog kills a server still there
SWITCH_SECONDS = 0.001  # CPython's default is 0.005


def serve(service: ApiService, host: str = "127.0.0.1", port: int = 8000, api_key: str | None = None,
          shutdown_timeout: float = 60.0, log_level: str = "info") -> None:
    """Serve until Ctrl-C or SIGTERM: stop accepting, let the requests in flight finish for up to
    `shutdown_timeout` seconds, then cancel their trees (their rows leave the batch at the next
    decode step), stop the driver and close the executor. A second Ctrl-C or SIGTERM cancels
    everything at once; whatever still runs FORCE_SECONDS later (a forward that does not return),
    the process then ends itself (exit code 130). Should none of its threads be able to run (the
    main thread in a call that holds the interpreter lock), a watchdog process (watchdog.py) kills
    it `shutdown_timeout` + KILL_SECONDS after the first signal, or KILL_SECONDS after a later one.

    `service` was made with own_thread=False: its driver grows the trees on this (main) thread, the
    one that loaded the models, while uvicorn serves on another (see TreeDriver). The signals are
    read on a third thread through a wakeup file descriptor, so they are seen at once even while
    the main thread sits in a long torch call."""
    server = uvicorn.Server(_config(service, host, port, api_key, shutdown_timeout, log_level))
    exit_code: list[int] = []
    # the driver thread holds the GIL between torch calls; a shorter switch interval lets the HTTP
    # thread answer (and refuse) requests within milliseconds while trees are being grown
    sys.setswitchinterval(SWITCH_SECONDS)

    def serve_then_close() -> None:
        try:
            server.run()  # off the main thread uvicorn installs no signal handlers: the watcher asks it
        except SystemExit as exc:  # uvicorn could not start (the port is taken, say): it logged why
            exit_code.append(exc.code if isinstance(exc.code, int) else 1)
        finally:
            service.close(drain=False, timeout=shutdown_timeout)

    reader, writer, dog = _signal_pipe(shutdown_timeout)
    previous = {sig: signal.signal(sig, lambda signum, frame: None) for sig in (signal.SIGINT, signal.SIGTERM)}
    previous_fd = signal.set_wakeup_fd(writer.fileno(), warn_on_full_buffer=False)
    watcher = threading.Thread(target=_watch_signals, args=(reader, server, service, shutdown_timeout),
                               name="seed-tot-api-signals", daemon=True)
    watcher.start()
    http = threading.Thread(target=serve_then_close, name="seed-tot-api-server", daemon=True)
    http.start()
    try:
        service.driver.run()
    finally:
        server.should_exit = True
        http.join(shutdown_timeout + 10)
        signal.set_wakeup_fd(previous_fd)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        writer.close()  # the watchdog reads the end of its input and ends
        if dog is not None:
            try:
                dog.wait(2)
            except subprocess.TimeoutExpired:
                dog.kill()
    if exit_code and exit_code[0]:
        raise SystemExit(exit_code[0])


def _signal_pipe(shutdown_timeout: float) -> tuple[socket.socket, socket.socket, subprocess.Popen | None]:
    """(the end the signal watcher reads, the end the signals are written to, the watchdog). The
    signals' bytes go through the watchdog process, which passes them on; where it cannot be
    started, straight to the watcher."""
    reader, writer = socket.socketpair()
    reader.settimeout(None)
    dog_in, writer_end = socket.socketpair()
    try:
        dog = subprocess.Popen([sys.executable, str(Path(__file__).with_name("watchdog.py")), str(os.getpid()),
                                str(shutdown_timeout + KILL_SECONDS), str(KILL_SECONDS)],
                               stdin=dog_in.fileno(), stdout=writer.fileno(), start_new_session=True)
    except OSError as exc:
        _say(f"no stop-signal watchdog ({exc}): a call that never lets the threads run may keep the server "
             "from stopping")
        writer_end.close()
        writer.setblocking(False)
        return reader, writer, None
    finally:
        dog_in.close()
    writer.close()
    writer_end.setblocking(False)
    return reader, writer_end, dog


def _watch_signals(reader: socket.socket, server: uvicorn.Server, service: ApiService, shutdown_timeout: float) -> None:
    """The first stop signal: stop accepting and drain; `shutdown_timeout` later, cancel the trees
    in flight. A second: cancel them now. Either way, FORCE_SECONDS after the cancel, end the
    process if it is still here. Returns when serve() closes the pair."""
    stopping_at = None
    while True:
        reader.settimeout(None if stopping_at is None else max(0.0, stopping_at + shutdown_timeout - time.monotonic()))
        try:
            received = reader.recv(64)
        except TimeoutError:  # the drain ran out of time
            received = None
        except OSError:
            return
        if received == b"":  # serve() ended and closed its end
            return
        if received and stopping_at is None:
            stopping_at = time.monotonic()
            _say(f"stopping: finishing the requests in flight (up to {shutdown_timeout:g} s); "
                 "Ctrl-C again to stop now")
            server.should_exit = True
            continue
        _say("stopping now: cancelling the requests in flight" if received else
             f"the requests in flight did not finish within {shutdown_timeout:g} s: cancelling them")
        server.force_exit = bool(received)
        server.should_exit = True
        service.driver.close(drain=False, timeout=0)
        reader.settimeout(FORCE_SECONDS)
        try:
            while reader.recv(64):  # more signals change nothing; the end of serve() does
                pass
            return
        except TimeoutError:
            pass
        except OSError:
            return
        _say(f"the server did not stop within {FORCE_SECONDS:g} s of cancelling its requests: exiting now")
        for child in multiprocessing.active_children():
            child.kill()
        os._exit(130)


def _say(message: str) -> None:
    print(f"seed-tot api: {message}", file=sys.stderr, flush=True)


def free_port(host: str = "127.0.0.1") -> int:
    with contextlib.closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


class ServerThread:
    """The server on a daemon thread (no signal handlers); `stop()` shuts it down cleanly."""

    def __init__(self, service: ApiService, host: str = "127.0.0.1", port: int | None = None,
                 api_key: str | None = None, shutdown_timeout: float = 10.0) -> None:
        self.service = service
        self.port = port or free_port(host)
        self.url = f"http://{host}:{self.port}"
        self.server = uvicorn.Server(_config(service, host, self.port, api_key, shutdown_timeout, "warning"))
        self.thread = threading.Thread(target=self.server.run, name="seed-tot-api-server", daemon=True)

    def start(self, timeout: float = 30.0) -> "ServerThread":
        self.thread.start()
        deadline = time.monotonic() + timeout
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the API server did not start on {self.url}")
            time.sleep(0.02)
        return self

    def stop(self, timeout: float = 30.0, close_service: bool = True) -> None:
        self.server.should_exit = True
        self.thread.join(timeout)
        if close_service:
            self.service.close(drain=False, timeout=timeout)
