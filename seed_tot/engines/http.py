"""JSON over HTTP with the standard library. Two kinds of failure:

- `Unreachable`: no answer (connection refused or reset, timeout, a 5xx reply) - worth retrying;
- `Refused`: the server answered and said no (a 4xx reply, or a body that is not JSON).
"""

from __future__ import annotations

import json
import socket
import urllib.error
import urllib.request


class Unreachable(Exception):
    pass


class Refused(Exception):
    def __init__(self, message: str, status: int | None = None):
        super().__init__(message)
        self.status = status


def call_json(base_url: str, path: str, body: dict | None = None, timeout: float = 30.0) -> dict:
    """GET `path` (body None) or POST `body` as JSON; return the decoded JSON reply."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        base_url.rstrip("/") + path,
        data=data,
        headers={"Content-Type": "application/json"} if data is not None else {},
        method="GET" if data is None else "POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as reply:
            raw = reply.read()
    except urllib.error.HTTPError as exc:
        detail = _short(exc.read())
        if exc.code >= 500:
            raise Unreachable(f"HTTP {exc.code} from {path}: {detail}") from None
        raise Refused(f"HTTP {exc.code} from {path}: {detail}", exc.code) from None
    except (urllib.error.URLError, ConnectionError, socket.timeout, TimeoutError, OSError) as exc:
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
