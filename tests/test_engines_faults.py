"""Faults against a real llama.cpp server: killed mid-run, wrong tokenizer, unreachable URL, slow
replies. Each ends in one sentence; problems finished before it are kept; no server outlives its run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from signal_helpers import sigint_as_at_a_terminal
from engine_helpers import THREADS, executor_for, requests_for, reversed_byte_tokenizer, tiny_gguf, tiny_server

from seed_tot.config import DecodeConfig
from seed_tot.engines.connect import connect
from seed_tot.engines.embedded import free_port
from seed_tot.errors import EngineError, TokenizerMismatchError

SMALL = ["--tiny", "--search", "bfs", "--depth", "1", "--thoughts", "2", "--max-new-tokens", "24", "--value-max-new-tokens", "6", "--no-cot",
         "--threads", str(THREADS)]


def one_sentence(message: str) -> bool:
    body = message.rstrip(".")
    return "\n" not in message and message.endswith(".") and ". " not in body.replace("e.g. ", "")


def seed_tot_in_process(*args: str):
    """The CLI in this process (click's runner): a subprocess spends seconds importing torch. Exit
    codes are click's (a user error: 2; an uncaught exception: 1), as in a real process."""
    from click.testing import CliRunner

    from seed_tot.cli import main

    return CliRunner().invoke(main, list(args))


def results_of(out) -> list[dict]:
    path = out / "results.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.is_file() else []


def test_wrong_tokenizer_is_refused_on_connect(tmp_path):
    with tiny_server(tmp_path, slots=1) as server:
        with pytest.raises(TokenizerMismatchError) as info:
            connect(server.url, reversed_byte_tokenizer())
    assert one_sentence(str(info.value)) and "--target" in str(info.value)


def test_unreachable_url_exits_2_before_any_problem(tmp_path):
    out = tmp_path / "run"
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    run = seed_tot_in_process("gsm8k", *SMALL, "--method", "server", "--server-url", url, "--limit", "1", "--out", str(out))
    assert run.exit_code == 2, (run.exception, run.stderr[-2000:])
    message = run.stderr.strip().splitlines()[-1].removeprefix("Error: ")
    assert "Traceback" not in run.stderr and one_sentence(message) and "Cannot reach the server" in message
    assert results_of(out) == []


def test_slow_replies_time_out_in_one_sentence(tmp_path):
    long = DecodeConfig(max_new_tokens=900, ignore_eos=True)  # ~1 s on the tiny model, far over the timeout
    with tiny_server(tmp_path, slots=1) as server:
        executor = executor_for(server.url, parallel=1, timeout=0.02, retries=1, backoff=0.05)
        started = time.perf_counter()
        with pytest.raises(EngineError) as info:
            executor.run(requests_for(long)[:1])
        executor.close()
        waited = time.perf_counter() - started
    message = str(info.value)
    assert one_sentence(message) and "no reply within 0.02 s" in message and "--resume" in message
    assert waited < 30  # bounded: two tries and one short back-off, not a hang


@pytest.mark.slow  # starts the CLI in subprocesses (imports torch each time)
def test_server_killed_mid_run_keeps_finished_problems_and_resume_finishes(tmp_path):
    out = tmp_path / "run"
    limit = 6
    with tiny_server(tmp_path, slots=2) as server:
        run = subprocess.Popen(
            [sys.executable, "-m", "seed_tot", "gsm8k", *SMALL, "--method", "server", "--server-url", server.url,
             "--limit", str(limit), "--concurrency", "1", "--out", str(out)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        deadline = time.monotonic() + 120
        while not results_of(out) and time.monotonic() < deadline and run.poll() is None:
            time.sleep(0.02)
        os.kill(server.pid, signal.SIGKILL)  # the server dies while the run goes on
        stdout, stderr = run.communicate(timeout=120)
    kept = results_of(out)
    assert run.returncode == 2, stderr[-2000:]
    message = stderr.strip().splitlines()[-1].removeprefix("Error: ")
    assert "Traceback" not in stderr and one_sentence(message), message
    assert "stopped answering" in message and "--resume" in message
    assert 1 <= len(kept) < limit  # finished problems are on disk, the rest did not run
    for record in kept:
        assert os.path.isfile(record["trace_path"])

    with tiny_server(tmp_path, slots=2) as again:  # a new server, another port
        resumed = seed_tot_in_process("gsm8k", *SMALL, "--method", "server", "--server-url", again.url,
                                      "--limit", str(limit), "--concurrency", "1", "--out", str(out), "--resume")
    assert resumed.exit_code == 0, (resumed.exception, resumed.stderr[-2000:])
    ids = [r["problem_id"] for r in results_of(out)]
    assert sorted(ids) == sorted(f"gsm8k-{i}" for i in range(1, limit + 1)) and len(ids) == limit
    assert [r["problem_id"] for r in results_of(out)[: len(kept)]] == [r["problem_id"] for r in kept]


def test_llama_cpp_method_runs_and_records_the_engine_then_stops_its_server(tmp_path):
    out = tmp_path / "run"
    before = _llama_children()
    run = seed_tot_in_process("gsm8k", *SMALL, "--method", "llama-cpp", "--with-draft", "--limit", "1", "--out", str(out))
    assert run.exit_code == 0, (run.exception, run.stderr[-2000:])
    records = results_of(out)
    assert len(records) == 1 and records[0]["new_tokens"] > 0
    trace = json.loads(open(records[0]["trace_path"]).read())
    engine = trace["config"]["engine"]
    assert engine["engine"] == "llama.cpp" and engine["started_by"] == "seed-tot"
    assert engine["model_sha256"] and len(engine["model_sha256"]) == 64 and engine["draft_sha256"]
    assert engine["slots"] == 4 and engine["sampler"]["top_k"] == 0
    assert trace["models"]["target"].endswith("tiny-target.gguf")
    assert records[0]["acceptance_rate"] is not None  # draft statistics reach the results
    assert _llama_children() == before  # the server stopped with the run


def test_server_child_exits_when_its_parent_dies(tmp_path):
    """The parent is killed (no cleanup runs): the llama.cpp child sees its stdin close and exits."""
    model = tiny_gguf(tmp_path)
    script = (
        "import os, sys\n"
        "from seed_tot.engines.embedded import LlamaServer, LlamaServerSettings\n"
        f"server = LlamaServer(LlamaServerSettings({model!r}, slots=1, ctx_per_slot=256, threads=1))\n"
        "print(server.pid, flush=True)\n"
        "os.kill(os.getpid(), 9)\n"
    )
    parent = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    child = int(parent.stdout.split()[0])
    deadline = time.monotonic() + 20
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(child)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie waiting for its (dead) parent's reaper counts as gone
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def _llama_children() -> set[int]:
    """Our own llama.cpp server processes (children of this test process's tree) still running."""
    found = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as handle:
                    command = handle.read().decode(errors="replace")
            except OSError:
                continue
            if "seed_tot.engines.llama_process" in command and _alive(int(entry)):
                found.add(int(entry))
    return found


@pytest.mark.slow  # starts the CLI in subprocesses (imports torch each time)
def test_serve_prints_its_url_serves_and_stops_on_ctrl_c(tmp_path):
    before = _llama_children()
    serve = subprocess.Popen([sys.executable, "-m", "seed_tot", "serve", "--tiny", "--threads", "1", "--slots", "2"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=sigint_as_at_a_terminal)
    try:
        first = serve.stdout.readline()
        url = first.split(" at ")[-1].strip()
        assert url.startswith("http://127.0.0.1:"), first
        executor = executor_for(url, parallel=2)
        assert executor.info.slots == 2 and executor.run(requests_for(DecodeConfig(max_new_tokens=4))[:2])
        executor.close()
    finally:
        serve.send_signal(signal.SIGINT)
        stdout, _ = serve.communicate(timeout=60)
    assert serve.returncode == 0 and "server stopped" in stdout
    assert _llama_children() <= before  # its llama.cpp child is gone


def test_close_with_requests_in_flight_returns_promptly(tmp_path):
    """Ctrl-C or an error mid-batch closes the executor while requests decode: closing stops the
    server and returns at once, it does not wait for the requests (up to --server-timeout)."""
    from seed_tot.engines.embedded import LlamaServer, LlamaServerSettings
    from seed_tot.engines.server_executor import ServerExecutor
    from seed_tot.models.tiny import byte_tokenizer

    server = LlamaServer(LlamaServerSettings(tiny_gguf(tmp_path), slots=1, ctx_per_slot=4096, threads=THREADS))
    tokenizer = byte_tokenizer()
    executor = ServerExecutor(connect(server.url, tokenizer), tokenizer, parallel=2, on_close=server.close)
    session = executor.session()
    session.add(requests_for(DecodeConfig(max_new_tokens=3000, ignore_eos=True))[:4])  # seconds of decoding
    time.sleep(0.3)
    started = time.perf_counter()
    executor.close()
    assert time.perf_counter() - started < 15
    assert server.process.poll() is not None
    # nothing ran to its end: queued requests were dropped, those in flight stopped with the server
    # (with an error, or with the part a server that is going away still answered)
    assert all(future.cancelled() or future.exception() is not None or len(future.result().token_ids) < 3000
               for future in session.pending)


def test_a_cancelled_server_request_is_never_sent_and_its_reply_is_dropped():
    """The API server cancels a tree's requests on a server session: one being answered (its reply
    is dropped) and one still waiting for a connection (never sent)."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from seed_tot.engines.server_executor import ServerSession
    from seed_tot.requests import GenerationRequest

    answering, sent = threading.Event(), []

    class OneConnection:
        _pool = ThreadPoolExecutor(max_workers=1)

        def generate(self, request, abort=None):
            sent.append(request.request_id)
            answering.wait(10)
            return request.request_id

    session = ServerSession(OneConnection())
    tickets = session.add([GenerationRequest([1], request_id=name) for name in ("a", "b", "c")])
    while not sent:
        time.sleep(0.01)
    session.cancel(tickets[:2])
    answering.set()
    ended = []
    while session.busy:
        ended += session.step()
    assert ended == [(tickets[2], "c")] and sent == ["a", "c"]
