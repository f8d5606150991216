"""Run the app under uvicorn: in the foreground (the CLI; Ctrl-C / SIGTERM stop it cleanly) or on
a background thread (tests, notebooks)."""

from __future__ import annotations

import contextlib
import signal
import socket
import threading
import time

import uvicorn

from seed_tot.cli.api_server.app import create_app
from seed_tot.cli.api_server.service import ApiService


def _config(service: ApiService, host: str, port: int, api_key: str | None, shutdown_timeout: float,
            log_level: str) -> uvicorn.Config:
    app = create_app(service, api_key)
    return uvicorn.Config(app, host=host, port=port, log_level=log_level, lifespan="off",
                          timeout_graceful_shutdown=shutdown_timeout)


def serve(service: ApiService, host: str = "127.0.0.1", port: int = 8000, api_key: str | None = None,
          shutdown_timeout: float = 60.0, log_level: str = "info") -> None:
    """Serve until Ctrl-C or SIGTERM: stop accepting, let the requests in flight finish (their
    trees are cancelled after `shutdown_timeout` seconds), then stop the driver and executor.

    `service` was made with own_thread=False: its driver grows the trees on this (main) thread, the
    one that loaded the models, while uvicorn serves on another (see TreeDriver)."""
    server = uvicorn.Server(_config(service, host, port, api_key, shutdown_timeout, log_level))
    exit_code: list[int] = []

    def serve_then_close() -> None:
        try:
            server.run()  # off the main thread uvicorn installs no signal handlers: stop() below asks it
        except SystemExit as exc:  # uvicorn could not start (the port is taken, say): it logged why
            exit_code.append(exc.code if isinstance(exc.code, int) else 1)
        finally:
            service.close(drain=False, timeout=shutdown_timeout)

    def stop(signum, frame) -> None:
        if server.should_exit:  # a second Ctrl-C: stop now, as uvicorn does, without waiting for the trees
            server.force_exit = True
        server.should_exit = True

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    http = threading.Thread(target=serve_then_close, name="seed-tot-api-server", daemon=True)
    http.start()
    try:
        service.driver.run()
    finally:
        server.should_exit = True
        http.join(shutdown_timeout + 10)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if exit_code and exit_code[0]:
        raise SystemExit(exit_code[0])


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
