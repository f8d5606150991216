"""`seed-tot api` against its worst client: well-behaved clients' latency with and without a hostile
one, the hostile requests' answers, peak memory, and how fast the server stops on Ctrl-C.

Starts `seed-tot api` (the tiny pair unless told otherwise) on 127.0.0.1 and a free port, then:
1. baseline: after one warm-up request per client (not counted), `--clients` well-behaved clients,
   each sending small requests one after another (at least `--requests`, and for `--baseline-seconds`,
   so that both phases see the machine over a similar stretch; a client retries a 429 after its
   Retry-After, as the openai client does);
2. the same clients again, from the moment the hostile client's first request runs until the last of
   its quick ones is answered, while it sends, in turn: the largest request the server's
   budget allows, over-budget requests, a huge n_thoughts, a body that stops midway (the client goes
   away), requests whose client goes away during the search (waiting, and reading a stream), a 2 MB body (declared, and chunked
   without a length), a body sent one byte at a time, malformed JSON, and a flood past the queue bound
   (each refusal timed from its request's last byte to its status line); with --sustained, the
   clients go on until the largest request is answered;
3. SIGINT while the largest allowed request runs (time to exit); then a fresh server, the same
   request and two SIGINTs 0.5 s apart.
Everything runs on loopback, every loop is bounded, and the servers are stopped (SIGKILL as a last
resort) whatever happens. Prints a table and writes --out (JSON).

  python scripts/api_adversarial_load.py --out results/bench_api/adversarial.json
  python scripts/api_adversarial_load.py --clients 4 --requests 2 --out /tmp/adv.json   # a short run
"""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from pathlib import Path

import click
import httpx

SEED_TOT = [sys.executable, "-m", "seed_tot"]
HOST = "127.0.0.1"
# 16 well-behaved clients and the hostile one's trees need more than the default 16 slots: with 16,
# every well-behaved request would also wait in the queue for a slot while the largest one runs
SERVER_SETTINGS = ["--concurrency", "32", "--thoughts", "2", "--depth", "2", "--value-samples", "1", "--cot-samples", "1",
                   "--max-new-tokens", "8", "--value-max-new-tokens", "4"]
SMALL = {"model": "gsm8k/self-consistency", "max_tokens": 8}
QUESTIONS = ["What is {a} plus {b}?", "Tom has {a} apples and buys {b} more. How many has he?",
             "What is {a} times {b}?"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return sock.getsockname()[1]


def chat(text: str, **fields) -> dict:
    return {**SMALL, "messages": [{"role": "user", "content": text}], **fields}


class Server:
    """A `seed-tot api` subprocess on a free loopback port; its output goes to `log`."""

    def __init__(self, args: list[str], log: Path, start_timeout: float = 180) -> None:
        self.port = free_port()
        self.url = f"http://{HOST}:{self.port}"
        self.log = log
        self._file = log.open("w")
        self.process = subprocess.Popen([*SEED_TOT, "api", "--host", HOST, "--port", str(self.port), *args],
                                        stdout=self._file, stderr=subprocess.STDOUT,
                                        env={**os.environ, "PYTHONUNBUFFERED": "1"})
        deadline = time.monotonic() + start_timeout
        while True:
            try:
                if httpx.get(self.url + "/health", timeout=2).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.kill()
                raise RuntimeError(f"the server did not start: {log.read_text()[-2000:]}")
            time.sleep(0.2)

    def health(self) -> dict:
        return httpx.get(self.url + "/health", timeout=5).json()

    def peak_rss_mib(self) -> float | None:
        try:
            for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    return round(int(line.split()[1]) / 1024, 1)
        except OSError:
            return None
        return None

    def stop_with(self, signals: list[float], timeout: float) -> dict:
        """Send SIGINT at each offset (seconds from now); the seconds until the process exited and its code."""
        started = time.monotonic()
        for offset in signals:
            time.sleep(max(0.0, started + offset - time.monotonic()))
            self.process.send_signal(signal.SIGINT)
        try:
            code = self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            return {"exit_seconds": None, "exit_code": None, "killed": True}
        return {"exit_seconds": round(time.monotonic() - started, 2), "exit_code": code, "killed": False}

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        self._file.close()


# --- the well-behaved clients ------------------------------------------------------------

def well_behaved(url: str, client_index: int, requests: int, stop_at: float, more=lambda: False) -> list[dict]:
    """One client's requests, one after another (at least `requests`, and on while `more()`);
    each: latency, status, retries after 429."""
    records = []
    with httpx.Client(timeout=120) as client:
        i = -1
        while (i := i + 1) < requests or (more() and time.monotonic() < stop_at):
            question = QUESTIONS[(client_index + i) % len(QUESTIONS)].format(a=client_index + 2, b=i + 3)
            body = chat(question, seed=client_index * 100 + i)
            started, retries, status = time.monotonic(), 0, None
            while time.monotonic() < stop_at:
                try:
                    reply = client.post(url + "/v1/chat/completions", json=body)
                    status = reply.status_code
                except httpx.TransportError as exc:
                    status = type(exc).__name__
                    break
                if status != 429 or retries >= 10:
                    break
                retries += 1
                time.sleep(float(reply.headers.get("retry-after", "1")))
            answered = status == 200 and reply.json()["choices"][0]["message"]["content"] is not None
            records.append({"seconds": time.monotonic() - started, "status": status, "retries": retries,
                            "answered": answered})
    return records


def clients_run(url: str, clients: int, requests: int, limit: float, more=lambda: False) -> dict:
    stop_at = time.monotonic() + limit
    started = time.monotonic()
    with ThreadPoolExecutor(clients) as pool:
        runs = list(pool.map(lambda c: well_behaved(url, c, requests, stop_at, more), range(clients)))
    records = [r for run in runs for r in run]
    latencies = sorted(r["seconds"] for r in records if r["answered"])
    return {"requests": len(records), "answered": len(latencies), "lost": len(records) - len(latencies),
            "retried_after_429": sum(r["retries"] for r in records),
            "p50_seconds": round(percentile(latencies, 50), 3) if latencies else None,
            "p95_seconds": round(percentile(latencies, 95), 3) if latencies else None,
            "statuses": sorted({str(r["status"]) for r in records}), "seconds": round(time.monotonic() - started, 1)}


def percentile(values: list[float], q: float) -> float:
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1]


# --- the hostile client ------------------------------------------------------------------

def largest_allowed(budget: int, max_tokens_cap: int = 8192) -> tuple[dict, dict]:
    """(the largest gsm8k/bfs request within `budget` at these settings, one just over it), by the
    server's own bound (seed_tot/cli/api_server/budget.py) at the SERVER_SETTINGS defaults."""
    from seed_tot.cli.api_server.budget import Work, token_bound

    extension = {"n_thoughts": 8, "depth": 3, "breadth": 4, "value_samples": 1, "cot_samples": 1,
                 "value_max_tokens": 4}

    def bound(max_tokens: int) -> int:
        return token_bound(Work(search="bfs", trees=1, n_thoughts=8, depth=3, breadth=4, iterations=1,
                                thought_tokens=max_tokens, value_samples=1, value_tokens=4, chains=2,
                                second_round=0, chain_tokens=max_tokens))

    tokens = max(t for t in range(1, max_tokens_cap + 1) if bound(t) <= budget)
    body = {"model": "gsm8k/bfs", "temperature": 1.0, "seed": 7,
            "messages": [{"role": "user", "content": "Count to one thousand, slowly."}]}
    over = {**body, "max_tokens": tokens + 1, "seed_tot": extension} if tokens < max_tokens_cap else \
        {**body, "max_tokens": tokens, "seed_tot": {**extension, "n_thoughts": 16}}
    return {**body, "max_tokens": tokens, "seed_tot": extension, "bound": bound(tokens)}, over


_CLIENT: httpx.Client | None = None


def client() -> httpx.Client:
    """One client per process, made before any timing (making one costs tens of ms of CPU)."""
    global _CLIENT
    if _CLIENT is None:
        _CLIENT = httpx.Client(timeout=900, limits=httpx.Limits(max_connections=128, max_keepalive_connections=128))
    return _CLIENT


# A refusal read from the body, or 429 where the queue was full as the request came: a full queue
# refuses before reading any body, so the cheaper refusal may come first.
REFUSED = (400, 429)
TOO_LARGE = (413, 429)


def timed_post(url: str, body, expect: tuple[int, ...], name: str, raw: bytes | None = None) -> dict:
    http = client()
    started = time.monotonic()
    try:
        if raw is not None:
            reply = http.post(url + "/v1/chat/completions", content=raw, headers={"content-type": "application/json"})
        else:
            reply = http.post(url + "/v1/chat/completions", json=body)
        status, code = reply.status_code, error_code(reply) if reply.status_code != 200 else None
        retry_after = reply.headers.get("retry-after")
    except httpx.TransportError as exc:
        status, code, retry_after = type(exc).__name__, None, None
    return {"request": name, "status": status, "code": code, "seconds": round(time.monotonic() - started, 4),
            "answered_at": time.monotonic(),  # the system's monotonic clock: comparable across the script's processes
            "expected": list(expect), "ok": status in expect, **({"retry_after": retry_after} if retry_after else {})}


def error_code(reply: httpx.Response) -> str | None:
    """The error's code of a refusal; None where the body is not the server's JSON (uvicorn's own 500
    to a request cut off by a second Ctrl-C, say)."""
    try:
        return (reply.json().get("error") or {}).get("code")
    except (ValueError, AttributeError):
        return None


def raw_exchange(port: int, head: bytes, parts: list[tuple[bytes, float]], close_early: bool = False) -> dict:
    """Send `head` and each (bytes, delay-before) part on a raw socket; read the status line (unless
    `close_early`: then close the connection after the parts). Seconds from the last byte sent to
    the status line."""
    with socket.create_connection((HOST, port), timeout=30) as sock:
        sock.sendall(head)
        for data, delay in parts:
            time.sleep(delay)
            try:
                sock.sendall(data)
            except OSError:  # the server answered and closed while we were still sending
                break
        sent = time.monotonic()
        if close_early:
            return {"status": "closed by client", "seconds": 0.0}
        try:
            first = sock.recv(4096)
        except (TimeoutError, OSError) as exc:
            return {"status": type(exc).__name__, "seconds": round(time.monotonic() - sent, 4)}
    status = int(first.split(b" ")[1]) if first.startswith(b"HTTP/") else repr(first[:40])
    return {"status": status, "seconds": round(time.monotonic() - sent, 4), "answered_at": time.monotonic()}


def head(port: int, length: int | None, chunked: bool = False) -> bytes:
    lines = [b"POST /v1/chat/completions HTTP/1.1", f"Host: {HOST}:{port}".encode(), b"Content-Type: application/json"]
    if chunked:
        lines.append(b"Transfer-Encoding: chunked")
    elif length is not None:
        lines.append(f"Content-Length: {length}".encode())
    return b"\r\n".join(lines) + b"\r\n\r\n"


def health(url: str) -> dict:
    return httpx.get(url + "/health", timeout=5).json()


def wait_running(url: str, count: int = 1, limit: float = 30) -> bool:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if health(url)["running"] >= count:
            return True
        time.sleep(0.05)
    return False


def disconnect_mid_search(url: str, port: int, body: dict) -> dict:
    """Send `body` (not streamed), close the connection once its tree is being grown; seconds until
    the server has cancelled the tree (its rows out of the batch)."""
    before = health(url)
    sock = socket.create_connection((HOST, port), timeout=30)
    data = json.dumps(body).encode()
    sock.sendall(head(port, len(data)) + data)
    wait_running(url, before["running"] + 1)
    time.sleep(0.3)  # its rows are decoding
    closed = time.monotonic()
    sock.close()
    deadline = closed + 30
    while time.monotonic() < deadline:
        now = health(url)
        if now["cancelled"] > before["cancelled"]:
            return {"request": "disconnect mid-search", "status": "cancelled", "ok": True,
                    "seconds": round(time.monotonic() - closed, 3), "expected": ["cancelled"],
                    "rows_cancelled": now["rows_cancelled"] - before["rows_cancelled"]}
        if now["completed"] > before["completed"] + 64:
            break
        time.sleep(0.02)
    return {"request": "disconnect mid-search", "status": "not cancelled", "ok": False, "seconds": None,
            "expected": ["cancelled"]}


def disconnect_mid_stream(url: str, port: int, body: dict) -> dict:
    """Stream `body`, close the connection after its first chunks; seconds until its rows are out."""
    before = health(url)
    data = json.dumps({**body, "stream": True}).encode()
    with socket.create_connection((HOST, port), timeout=120) as sock:
        sock.sendall(head(port, len(data)) + data)
        received = b""
        while b"progress" not in received and len(received) < 1 << 16:  # its first batch is done
            part = sock.recv(4096)
            if not part:
                break
            received += part
    closed = time.monotonic()
    while time.monotonic() < closed + 30:
        if health(url)["cancelled"] > before["cancelled"]:
            return {"request": "disconnect mid-stream", "status": "cancelled", "ok": True, "expected": ["cancelled"],
                    "seconds": round(time.monotonic() - closed, 3)}
        time.sleep(0.02)
    return {"request": "disconnect mid-stream", "status": "not cancelled", "ok": False, "seconds": None,
            "expected": ["cancelled"]}


def flood(port: int, requests: int, limit: float = 120) -> dict:
    """`requests` small requests at once: some must be refused with 429 and Retry-After, fast.

    Each has a connection of its own, opened first; the requests (encoded beforehand) are then sent
    back to back and one thread reads every reply's head as it comes, so each time (from its
    request's last byte to its status line) is the server's, not a client thread's wait for its turn."""
    import selectors

    socks, payloads = [], []
    for i in range(requests):
        data = json.dumps(chat(f"What is {i} plus 1?", seed=i, n=2)).encode()
        payloads.append(head(port, len(data)) + data)
        socks.append(socket.create_connection((HOST, port), timeout=limit))
    sent, heads = {}, {}
    selector = selectors.DefaultSelector()
    try:
        for sock, payload in zip(socks, payloads):
            sock.sendall(payload)
            sent[sock] = time.monotonic()
            sock.setblocking(False)
            selector.register(sock, selectors.EVENT_READ, bytearray())
        deadline = time.monotonic() + limit
        while len(heads) < requests and time.monotonic() < deadline:
            for key, _ in selector.select(timeout=1.0):
                sock, buffer = key.fileobj, key.data
                try:
                    part = sock.recv(65536)
                except BlockingIOError:
                    continue
                buffer += part
                if b"\r\n\r\n" in buffer or not part:
                    heads[sock] = (time.monotonic() - sent[sock], bytes(buffer.split(b"\r\n\r\n")[0]))
                    selector.unregister(sock)
    finally:
        selector.close()
        for sock in socks:
            sock.close()
    replies = []
    for sock in socks:
        seconds, text = heads.get(sock, (None, b""))
        lines = text.decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ")[1]) if lines[0].startswith("HTTP/") else "no answer"
        retry_after = any(line.lower().startswith("retry-after:") for line in lines[1:])
        replies.append({"status": status, "seconds": seconds, "retry_after": retry_after,
                        "ok": status in (200, 429)})
    refused = sorted(r["seconds"] for r in replies if r["status"] == 429)
    retry_after = all(r["retry_after"] for r in replies if r["status"] == 429)
    return {"request": f"flood of {requests} at once", "status": f"{len(refused)} x 429, "
            f"{sum(r['status'] == 200 for r in replies)} x 200", "expected": ["429 for some, 200 for the rest"],
            "ok": bool(refused) and all(r["ok"] for r in replies) and retry_after,
            "seconds": round(statistics.median(refused), 4) if refused else None,
            "max_seconds": round(refused[-1], 4) if refused else None, "retry_after_sent": retry_after,
            "refused_under_100_ms": sum(seconds < 0.1 for seconds in refused)}


def guarded(name: str, attempt) -> dict:
    """`attempt()`, or the record of how it failed (the run goes on)."""
    try:
        return attempt()
    except (OSError, httpx.HTTPError) as exc:
        return {"request": name, "status": f"{type(exc).__name__}: {exc}", "ok": False, "seconds": None,
                "expected": ["cancelled"]}


def hostile(url: str, port: int, budget: int, queue_bound: int) -> list[dict]:
    """The hostile client's requests in turn (run in a process of its own, so that its timings are
    not the well-behaved clients' threads' to share)."""
    largest, over = largest_allowed(budget)
    largest.pop("bound")
    client().get(url + "/health")  # connect once before any timing
    results = []
    wait_running(url)  # the largest allowed request (sent by the caller) is being grown
    results.append(timed_post(url, over, REFUSED, "over budget (max_tokens one more)"))
    results.append(timed_post(url, chat("What is 2 plus 2?", n=8, max_tokens=8192), REFUSED, "over budget (n=8, max_tokens=8192)"))
    results.append(timed_post(url, chat("What is 2 plus 2?", seed_tot={"n_thoughts": 200000}), REFUSED, "n_thoughts 200000"))
    results.append(timed_post(url, chat("What is 2 plus 2?", seed_tot={"n_thoughts": 10**9}), REFUSED, "n_thoughts 10^9"))
    results.append(timed_post(url, None, REFUSED, "malformed JSON", raw=b'{"model": "gsm8k/bfs", "messages": ['))
    body = json.dumps(chat("What is 3 plus 3?")).encode()
    results.append({"request": "disconnect mid-body", **raw_exchange(port, head(port, len(body)), [(body[:20], 0)],
                                                                      close_early=True),
                    "expected": ["closed by client"], "ok": True})
    results.append({"request": "2 MB body, Content-Length", **raw_exchange(port, head(port, 2 << 20), [(b"{", 0)]),
                    "expected": list(TOO_LARGE)})
    chunk = b"x" * (64 << 10)
    chunks = [(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n", 0)] * 32
    results.append({"request": "2 MB body, chunked", **raw_exchange(port, head(port, None, chunked=True), chunks),
                    "expected": list(TOO_LARGE)})
    slow = json.dumps(chat("What is 4 plus 4?", seed=4)).encode()
    step = max(1, len(slow) // 20)
    results.append({"request": "slow body (20 pieces, 0.15 s apart)",
                    **raw_exchange(port, head(port, len(slow)), [(slow[i:i + step], 0.15) for i in range(0, len(slow), step)]),
                    "expected": [200]})
    results.append(guarded("disconnect mid-search", lambda: disconnect_mid_search(url, port, {**largest, "seed": 11})))
    results.append(guarded("disconnect mid-stream", lambda: disconnect_mid_stream(url, port, chat(
        "Count to one hundred.", model="gsm8k/bfs", max_tokens=256, temperature=1.0, seed=12,
        seed_tot={"n_thoughts": 4, "depth": 3}))))
    results.append(flood(port, 2 * queue_bound + 32))
    for r in results:
        r.setdefault("ok", r["status"] in r["expected"])
    return results


def sigint_during_largest(server: Server, budget: int, signals: list[float], limit: float) -> dict:
    """Send the largest allowed request, then SIGINT at each offset once its rows decode; the time to exit."""
    try:
        largest, _ = largest_allowed(budget)
        largest.pop("bound")
        asker = threading.Thread(target=lambda: timed_post(server.url, largest, (200, 503), "largest"), daemon=True)
        asker.start()
        wait_running(server.url)
        time.sleep(0.5)  # its rows are decoding
        return server.stop_with(signals, limit)
    finally:
        server.kill()


def machine() -> dict:
    model = next((line.split(":", 1)[1].strip() for line in subprocess.run(
        ["lscpu"], capture_output=True, text=True).stdout.splitlines() if line.startswith("Model name")), None)
    flags = Path("/proc/cpuinfo").read_text().split("flags", 1)[1].split("\n", 1)[0] if Path("/proc/cpuinfo").exists() else ""
    return {"cpu": model, "cores": os.cpu_count(), "avx2": " avx2" in flags, "avx512f": " avx512f" in flags,
            "load_average": os.getloadavg()[0]}


def ratios(base: dict, under: dict) -> dict:
    return {f"{q}_ratio": round(under[f"{q}_seconds"] / base[f"{q}_seconds"], 2)
            if base[f"{q}_seconds"] and under[f"{q}_seconds"] else None for q in ("p50", "p95")}


def table(result: dict) -> str:
    base, under = result["baseline"], result["with_hostile"]
    lines = ["| well-behaved clients | requests | answered | lost | p50 s | p95 s | 429 retries |", "|---|---|---|---|---|---|---|"]
    for name, row in (("alone", base), ("with the hostile client", under)):
        lines.append(f"| {name} | {row['requests']} | {row['answered']} | {row['lost']} | {row['p50_seconds']} | "
                     f"{row['p95_seconds']} | {row['retried_after_429']} |")
    lines.append(f"p50 x{result['p50_ratio']}, p95 x{result['p95_ratio']} beside the hostile client")
    lines += ["", "| hostile request | status | code | seconds to the answer | expected |", "|---|---|---|---|---|"]
    for r in result["hostile"]:
        seconds = f"{r['seconds']} (median; max {r['max_seconds']})" if "max_seconds" in r else r["seconds"]
        lines.append(f"| {r['request']} | {r['status']} | {r.get('code') or ''} | {seconds} | "
                     f"{', '.join(map(str, r['expected']))} |")
    lines += ["", f"peak RSS of the server: {result['peak_rss_mib']} MiB",
              f"SIGINT during the largest allowed request: exit after {result['sigint_once']['exit_seconds']} s "
              f"(code {result['sigint_once']['exit_code']}, --shutdown-timeout {result['shutdown_timeout']:g})",
              f"two SIGINTs 0.5 s apart: exit after {result['sigint_twice']['exit_seconds']} s "
              f"(code {result['sigint_twice']['exit_code']})",
              f"tracebacks in the server's log: {result['tracebacks_in_log']}"]
    return "\n".join(lines)


@click.command()
@click.option("--clients", type=int, default=16, show_default=True, help="Well-behaved clients.")
@click.option("--requests", "requests", type=int, default=8, show_default=True, help="Requests per well-behaved client and phase.")
@click.option("--max-request-tokens", "budget", type=int, default=65536, show_default=True, help="The server's work budget.")
@click.option("--max-queue", "queue_bound", type=int, default=32, show_default=True, help="The server's queue bound.")
@click.option("--shutdown-timeout", "shutdown_timeout", type=float, default=5.0, show_default=True)
@click.option("--out", "out_path", type=click.Path(dir_okay=False), required=True, help="JSON results.")
@click.option("--work", "work_dir", type=click.Path(file_okay=False), default="runs/api_adversarial", show_default=True,
              help="The servers' logs and traces.")
@click.option("--phase-limit", type=float, default=600, show_default=True, help="Seconds a phase may take at most.")
@click.option("--baseline-seconds", type=float, default=20, show_default=True,
              help="Seconds the well-behaved clients keep sending in the baseline (at least --requests each).")
@click.option("--sustained", is_flag=True, help="The well-behaved clients keep sending until the largest allowed "
              "request is answered (or --phase-limit), not only while the quick attacks run.")
@click.argument("server_args", nargs=-1)
def main(clients: int, requests: int, budget: int, queue_bound: int, shutdown_timeout: float, out_path: str,
         work_dir: str, phase_limit: float, baseline_seconds: float, sustained: bool, server_args: tuple[str, ...]) -> None:
    """Everything after the options goes to `seed-tot api` (default: --tiny --dtype float32 --threads 1)."""
    result = run(clients, requests, budget, queue_bound, shutdown_timeout, Path(out_path), Path(work_dir), phase_limit,
                 list(server_args) or ["--tiny", "--dtype", "float32", "--threads", "1"], sustained, baseline_seconds)
    print(table(result))


def run(clients: int, requests: int, budget: int, queue_bound: int, shutdown_timeout: float, out_path: Path,
        logs: Path, phase_limit: float, server_args: list[str], sustained: bool = False,
        baseline_seconds: float = 20) -> dict:
    out_path.parent.mkdir(parents=True, exist_ok=True)
    logs.mkdir(parents=True, exist_ok=True)
    args = [*server_args, *SERVER_SETTINGS, "--out", str(logs / "traces"), "--max-request-tokens", str(budget),
            "--max-queue", str(queue_bound), "--shutdown-timeout", str(shutdown_timeout)]
    started = time.monotonic()
    server = Server(args, logs / "server.log")
    try:
        load_before = os.getloadavg()[0]
        clients_run(server.url, clients, 1, phase_limit)  # warm-up: first-request costs are no one's latency
        until = time.monotonic() + baseline_seconds
        baseline = clients_run(server.url, clients, requests, phase_limit, more=lambda: time.monotonic() < until)
        largest, _ = largest_allowed(budget)
        bound = largest.pop("bound")
        big: list[dict] = []
        sender = threading.Thread(target=lambda: big.append(
            {**timed_post(server.url, largest, (200,), "largest allowed"), "bound": bound}), daemon=True)
        sender.start()
        with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
            attack = pool.submit(hostile, server.url, server.port, budget, queue_bound)
            wait_running(server.url, 1, phase_limit)  # the largest allowed request is in
            under = clients_run(server.url, clients, requests, phase_limit,
                                more=lambda: not attack.done() or (sustained and not big))
            hostile_results = attack.result(phase_limit)
        sender.join(phase_limit)
        hostile_results.insert(0, big[0] if big else {
            "request": "largest allowed", "status": f"not answered within {phase_limit:g} s", "ok": False,
            "seconds": None, "expected": [200], "bound": bound})
        peak = server.peak_rss_mib()
        health_after = server.health()
        once = sigint_during_largest(server, budget, [0.0], shutdown_timeout + 30)
    finally:
        server.kill()
    log_text = (logs / "server.log").read_text()
    twice = sigint_during_largest(Server(args, logs / "server-sigint2.log"), budget, [0.0, 0.5], shutdown_timeout + 30)
    result = {
        "command": " ".join(["python", "scripts/api_adversarial_load.py", "--clients", str(clients), "--requests",
                             str(requests), "--baseline-seconds", f"{baseline_seconds:g}",
                             "--max-request-tokens", str(budget), "--max-queue", str(queue_bound),
                             "--shutdown-timeout", f"{shutdown_timeout:g}", *(["--sustained"] if sustained else []),
                             "--out", str(out_path), *server_args]),
        "sustained": sustained, "server_args": args, "machine": {**machine(), "load_average_at_start": load_before}, "shutdown_timeout": shutdown_timeout, "budget": budget,
        "baseline": baseline, "with_hostile": under, **ratios(baseline, under), "hostile": hostile_results, "peak_rss_mib": peak,
        "health_after": health_after, "sigint_once": once, "sigint_twice": twice,
        "tracebacks_in_log": log_text.count("Traceback"), "seconds": round(time.monotonic() - started, 1),
    }
    out_path.write_text(json.dumps(result, indent=2) + "\n")
    return result


if __name__ == "__main__":
    main()
