"""JSON over HTTP with the standard library. Three kinds of failure:

- `Unreachable`: no answer (connection refused or reset, timeout, a 5xx reply) - worth retrying;
- `Refused`: the server answered and said no (a 4xx reply, or a body that is not JSON);
- `Aborted`: this process closed the connection (`Abort`), so the server stops the request.
"""

from __future__ import annotations

import http.client
import json
import socket
import threading
import urllib.error
import urllib.request


class Unreachable(Exception):
    pass


class Refused(Exception):
    def __init__(self, message: str, status: int | None = None):
        super().__init__(message)
        self.status = status


class Aborted(Exception):
    pass


class Abort:
    """Closes one call's connection from another thread: a server such as llama.cpp's sees its client
    go and frees the slot at once, where a reply left unread would decode to its end."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._connection: http.client.HTTPConnection | None = None
        self.requested = False

    def __call__(self) -> None:
        with self._lock:
            self.requested = True
            self._shut()

    def attach(self, connection: http.client.HTTPConnection) -> None:
        """Called once the call's connection is up (closed at once if the abort came first)."""
        with self._lock:
            self._connection = connection
            if self.requested:
                self._shut()

    def _shut(self) -> None:
        if self._connection is not None and self._connection.sock is not None:
            try:
                self._connection.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass  # already closed

    def opener(self) -> urllib.request.OpenerDirector:
        """An urllib opener whose connections this handle can close."""
        abort = self

        def closable(connection_class):
            class Closable(connection_class):
                def connect(self):
                    super().connect()
                    abort.attach(self)
            return Closable

        class Http(urllib.request.HTTPHandler):
            def http_open(self, req):
                return self.do_open(closable(http.client.HTTPConnection), req)

        class Https(urllib.request.HTTPSHandler):
            def https_open(self, req):
                return self.do_open(closable(http.client.HTTPSConnection), req, context=self._context)

        return urllib.request.build_opener(Http, Https)


def call_json(base_url: str, path: str, body: dict | None = None, timeout: float = 30.0,
              abort: Abort | None = None) -> dict:
    """GET `path` (body None) or POST `body` as JSON; return the decoded JSON reply. With `abort`,
    calling it closes the connection and this raises Aborted."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        base_url.rstrip("/") + path,
        data=data,
        headers={"Content-Type": "application/json"} if data is not None else {},
        method="GET" if data is None else "POST",
    )
    open_url = abort.opener().open if abort is not None else urllib.request.urlopen
    try:
        with open_url(request, timeout=timeout) as reply:
            raw = reply.read()
    except urllib.error.HTTPError as exc:
        detail = _short(exc.read())
        if exc.code >= 500:
            raise Unreachable(f"HTTP {exc.code} from {path}: {detail}") from None
        raise Refused(f"HTTP {exc.code} from {path}: {detail}", exc.code) from None
    except (urllib.error.URLError, ConnectionError, socket.timeout, TimeoutError, OSError,
            http.client.HTTPException) as exc:
        if abort is not None and abort.requested:
            raise Aborted("this process closed the connection") from None
        reason = getattr(exc, "reason", exc)
        if isinstance(reason, (socket.timeout, TimeoutError)):
            raise Unreachable(f"no reply within {timeout:g} s") from None
        raise Unreachable(str(reason) or type(reason).__name__) from None
    try:
        return json.loads(raw)
    except ValueError:
        raise Refused(f"{path} did not answer with JSON: {_short(raw)}") from None


def _short(raw: bytes) -> str:
    text = raw.decode(errors="replace").strip().replace("\n", " ")
    return text[:200] or "(empty body)"
