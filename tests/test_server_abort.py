"""A cancelled request to a server has its connection closed, so the server (llama.cpp's stops a
request whose client went away) frees the slot instead of decoding the request to its end."""

import threading
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from seed_tot.engines.http import Abort, Aborted, call_json
from seed_tot.engines.server_executor import ServerSession


class HoldingServer(ThreadingHTTPServer):
    """Reads a request and never answers; notes when the client closed the connection."""

    def __init__(self):
        self.got_request, self.client_left = threading.Event(), threading.Event()

        class Handler(BaseHTTPRequestHandler):
            def do_POST(handler):
                handler.rfile.read(int(handler.headers["Content-Length"]))
                self.got_request.set()
                handler.connection.settimeout(30)
                if handler.connection.recv(1) == b"":  # end of stream: the client closed its side
                    self.client_left.set()

            def log_message(handler, *args):
                pass

        super().__init__(("127.0.0.1", 0), Handler)


@pytest.fixture
def holding_server():
    server = HoldingServer()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def test_an_aborted_call_closes_its_connection_and_raises_aborted(holding_server):
    abort, raised = Abort(), []

    def call():
        try:
            call_json(f"http://127.0.0.1:{holding_server.server_port}", "/completion", {"prompt": "x"}, 30, abort)
        except Aborted as exc:
            raised.append(exc)

    caller = threading.Thread(target=call)
    caller.start()
    assert holding_server.got_request.wait(10)
    abort()
    caller.join(10)
    assert raised and holding_server.client_left.wait(10)


def test_an_abort_before_the_call_sends_nothing(holding_server):
    abort = Abort()
    abort()
    with pytest.raises(Aborted):
        call_json(f"http://127.0.0.1:{holding_server.server_port}", "/completion", {"prompt": "x"}, 30, abort)
    assert not holding_server.got_request.is_set()


class BlockingExecutor:
    """generate() waits until its request is aborted (a request the server is still decoding)."""

    def __init__(self):
        self._pool = ThreadPoolExecutor(max_workers=2)
        self.started = threading.Semaphore(0)

    def generate(self, request, abort):
        self.started.release()
        while not abort.requested:
            threading.Event().wait(0.01)
        raise Aborted("closed")


def test_cancelling_a_running_request_aborts_it_and_a_queued_one_never_runs():
    executor = BlockingExecutor()
    session = ServerSession(executor)
    first, second, queued = session.add(["a", "b", "c"])  # two workers: "c" waits for one
    assert executor.started.acquire(timeout=10) and executor.started.acquire(timeout=10)
    session.cancel([first, queued])
    assert session.width == 1 and queued not in session.aborts
    session.cancel([second])
    assert not session.busy
    executor._pool.shutdown(wait=True)  # every worker returned: the aborted calls ended
