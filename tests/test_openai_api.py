"""`seed-tot api` on the tiny pair: the official openai client, raw shapes, a bounded load test
(every answer from its own tree), bad requests, the API key, a client that goes away, SIGTERM and Ctrl-C."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

openai = pytest.importorskip("openai")

from conftest import requires_real_models  # noqa: E402
from seed_tot.cli.api_server.server import ServerThread, free_port  # noqa: E402
from seed_tot.cli.api_server.service import ApiService  # noqa: E402
from seed_tot.cli.run_config import RunConfig  # noqa: E402

SMALL = dict(n_thoughts=2, depth=2, iterations=2, value_samples=1, cot_samples=1, max_new_tokens=8,
             value_max_new_tokens=4)
STATEMENT = ("As initial conditions I have that, the red block is clear, the blue block is clear, the hand is empty, "
             "the red block is on the table and the blue block is on the table.\n"
             "My goal is to have that the red block is on top of the blue block.")


def tiny_options(out: Path, **overrides) -> RunConfig:
    settings = dict(
        target="default-target", draft="default-draft", tiny=True, device="cpu", dtype="float32", threads=None,
        method="batched-lookup", k_config=None, k=None, workers=None, search=None, breadth=1,
        exploration_weight=1.0, output_strategy="max_reward", temperature=0.7, top_p=0.95, cot=True, vote=True,
        seed=0, data_path=None, limit=None, start=0, ids=None, out_dir=str(out), resume=False, concurrency=8,
        value_temperature=0.7,
    )
    settings.update(SMALL)
    settings.update(overrides)
    return RunConfig(**settings)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    out = tmp_path_factory.mktemp("api")
    service = ApiService(tiny_options(out), out)
    running = ServerThread(service).start()
    yield running
    running.stop()


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0, timeout=60)


def trace_of(server, trace_id: str) -> dict:
    reply = httpx.get(f"{server.url}/v1/traces/{trace_id}", timeout=10)
    assert reply.status_code == 200
    return reply.json()


def test_models_name_task_and_search(client):
    ids = {model.id for model in client.models.list()}
    assert {"gsm8k/self-consistency", "gsm8k/bfs", "gsm8k/mcts", "blocksworld/mcts", "creative-writing/bfs"} <= ids
    assert "creative-writing/self-consistency" not in ids  # the task has no chain-of-thought prompt
    assert client.models.retrieve("blocksworld/mcts").model_extra["seed_tot"]["search"] == "mcts"


def test_chat_with_the_openai_client_answers_from_its_own_trace(server, client):
    question = "Tom has 3 apples and buys 4 more. How many apples does he have?"
    reply = client.chat.completions.create(model="gsm8k/bfs", messages=[{"role": "system", "content": "be brief"},
                                                                        {"role": "user", "content": question}],
                                           max_tokens=8, seed=11)
    assert reply.object == "chat.completion" and reply.model == "gsm8k/bfs"
    assert isinstance(reply.choices[0].message.content, str)
    assert reply.usage.completion_tokens > 0 and reply.usage.prompt_tokens > 0
    extension = reply.model_extra["seed_tot"]
    assert extension["seed"] == 11 and extension["search"] == "bfs" and extension["nodes"] > 1
    trace = trace_of(server, extension["trace_id"])
    assert trace["question"] == question and trace["search"] == "bfs"
    assert trace["config"]["search"]["seed"] == 11
    assert trace["metrics"]["new_tokens"] == reply.usage.completion_tokens
    page = httpx.get(server.url + extension["trace_html_url"], timeout=10)
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert "<html" in page.text.lower()


def test_completions_and_the_stream_reproduce_the_chat_answer_for_one_seed(client):
    chat = client.chat.completions.create(model="blocksworld/mcts", messages=[{"role": "user", "content": STATEMENT}],
                                          max_tokens=8, seed=4)
    text = client.completions.create(model="blocksworld/mcts", prompt=STATEMENT, max_tokens=8, seed=4)
    assert text.object == "text_completion"
    assert text.choices[0].text == chat.choices[0].message.content
    chunks = list(client.chat.completions.create(
        model="blocksworld/mcts", messages=[{"role": "user", "content": STATEMENT}], max_tokens=8, seed=4,
        stream=True, stream_options={"include_usage": True}))
    progress = [c for c in chunks if c.choices and "progress" in (c.model_extra.get("seed_tot") or {})]
    assert progress and all(c.choices[0].delta.content is None for c in progress)
    streamed = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert streamed == chat.choices[0].message.content
    finals = [c for c in chunks if c.choices and c.choices[0].finish_reason]
    assert len(finals) == 1 and finals[0].model_extra["seed_tot"]["trace_id"]
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == chat.usage.completion_tokens


def test_n_grows_one_tree_per_choice(server, client):
    reply = client.chat.completions.create(model="gsm8k/self-consistency", n=2, seed=7, max_tokens=8,
                                           messages=[{"role": "user", "content": "What is 6 times 7?"}])
    seeds = [choice.model_extra["seed_tot"]["seed"] for choice in reply.choices]
    assert seeds == [7, 8] and len(set(reply.model_extra["seed_tot"]["trace_ids"])) == 2


def test_raw_stream_ends_with_done(server):
    body = {"model": "gsm8k/self-consistency", "prompt": "What is 2 plus 2?", "max_tokens": 8, "seed": 1,
            "stream": True}
    with httpx.stream("POST", server.url + "/v1/completions", json=body, timeout=60) as reply:
        assert reply.headers["content-type"].startswith("text/event-stream")
        lines = [line for line in reply.iter_lines() if line]
    assert lines[-1] == "data: [DONE]"
    events = [json.loads(line.removeprefix("data: ")) for line in lines[:-1]]
    assert all(e["object"] == "text_completion" for e in events)
    assert events[-1]["choices"][0]["finish_reason"] in ("stop", "length")


def test_an_answer_the_token_cap_cut_says_length_even_when_empty(server):
    """One token per chain: every chain is cut, no answer is found; OpenAI clients read 'length' as a cut."""
    body = {"model": "gsm8k/self-consistency", "messages": [{"role": "user", "content": "What is 2 plus 2?"}],
            "max_tokens": 1, "seed": 1}
    reply = httpx.post(server.url + "/v1/chat/completions", json=body, timeout=60).json()
    assert reply["choices"][0]["finish_reason"] == "length"
    with httpx.stream("POST", server.url + "/v1/chat/completions", json={**body, "stream": True}, timeout=60) as r:
        finish = [e["choices"][0]["finish_reason"] for e in sse_events(r) if e["choices"]]
    assert finish[-1] == "length"


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")
def test_curl_gets_the_raw_shapes(server):
    """The curl call of docs/api_server.md: a chat completion and the model list, as a shell user sends them."""
    body = json.dumps({"model": "gsm8k/self-consistency", "messages": [{"role": "user", "content": "What is 3 plus 4?"}],
                       "max_tokens": 8, "seed": 2})
    chat = subprocess.run(["curl", "-sS", "-H", "Content-Type: application/json", "-d", body,
                           server.url + "/v1/chat/completions"], capture_output=True, text=True, timeout=120)
    assert chat.returncode == 0, chat.stderr
    reply = json.loads(chat.stdout)
    assert reply["object"] == "chat.completion" and reply["choices"][0]["message"]["role"] == "assistant"
    assert reply["usage"]["completion_tokens"] > 0 and reply["seed_tot"]["trace_id"]
    models = json.loads(subprocess.run(["curl", "-sS", server.url + "/v1/models"], capture_output=True, text=True,
                                       timeout=30).stdout)
    assert models["object"] == "list" and "gsm8k/self-consistency" in {m["id"] for m in models["data"]}


@pytest.mark.parametrize("path,body,status,param", [
    ("/v1/chat/completions", {"model": "nope/bfs", "messages": [{"role": "user", "content": "1+1?"}]}, 404, "model"),
    ("/v1/chat/completions", {"model": "gsm8k/bfs", "messages": [{"role": "user", "content": "1+1?"}],
                              "temperature": 3}, 400, "temperature"),
    ("/v1/chat/completions", {"model": "gsm8k/bfs", "messages": []}, 400, "messages"),
    ("/v1/chat/completions", {"model": "gsm8k/bfs", "messages": [{"role": "system", "content": "x"}]}, 400, "messages"),
    ("/v1/chat/completions", {"model": "gsm8k/bfs", "messages": [{"role": "user", "content": "1+1?"}],
                              "stop": ["\n"]}, 400, "stop"),
    ("/v1/chat/completions", {"model": "gsm8k/bfs", "messages": [{"role": "user", "content": "1+1?"}],
                              "seed_tot": {"n_thoughts": 0}}, 400, "seed_tot.n_thoughts"),
    ("/v1/chat/completions", {"model": "gsm8k/bfs", "messages": [{"role": "user", "content": "1+1?"}],
                              "seed_tot": {"colour": 1}}, 400, "seed_tot.colour"),
    ("/v1/completions", {"model": "gsm8k/bfs", "prompt": "1+1?", "n": 99}, 400, "n"),
    ("/v1/completions", {"model": "creative-writing/bfs", "prompt": "Only one sentence."}, 400, "prompt"),
    ("/v1/completions", {"model": "blocksworld/bfs", "prompt": "Stack the blocks, please."}, 400, "prompt"),
    ("/v1/completions", {"model": "gsm8k/bfs", "prompt": "   "}, 400, "prompt"),
])
def test_bad_requests_get_an_openai_error_object(server, path, body, status, param):
    reply = httpx.post(server.url + path, json=body, timeout=10)
    assert reply.status_code == status
    error = reply.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["param"] == param and error["message"].endswith(".")


def test_malformed_json_and_unknown_trace(server):
    reply = httpx.post(server.url + "/v1/chat/completions", content=b"{not json", timeout=10)
    assert reply.status_code == 400 and "JSON" in reply.json()["error"]["message"]
    assert httpx.get(server.url + "/v1/traces/api-none", timeout=10).status_code == 404
    assert httpx.get(server.url + "/v1/traces/..%2f..%2fsecret", timeout=10).status_code in (400, 404)
    with pytest.raises(openai.NotFoundError):
        openai.OpenAI(base_url=server.url + "/v1", api_key="x", max_retries=0).chat.completions.create(
            model="gsm8k/nothing", messages=[{"role": "user", "content": "1+1?"}])


def test_many_users_share_one_batch_and_each_answer_is_its_own(server):
    questions = [f"Ann has {i} pens and gets {i + 3} more. How many pens does she have?" for i in range(64)]
    models = ["gsm8k/self-consistency", "gsm8k/bfs"]

    def ask(index: int) -> tuple[str, dict]:
        body = {"model": models[index % 2], "messages": [{"role": "user", "content": questions[index]}],
                "max_tokens": 8, "seed": index}
        reply = httpx.post(server.url + "/v1/chat/completions", json=body, timeout=120)
        assert reply.status_code == 200, reply.text
        return questions[index], reply.json()

    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=16) as pool:
        replies = list(pool.map(ask, range(len(questions))))
    assert time.monotonic() - started < 120
    widest = 0
    for question, reply in replies:
        trace = trace_of(server, reply["seed_tot"]["trace_id"])
        assert trace["question"] == question
        assert trace["config"]["search"]["seed"] == reply["seed_tot"]["seed"]
        widest = max([widest] + [b["merged_size"] - b["size"] for b in trace["batches"]])
    assert widest > 0  # some tree's rows decoded beside rows of other trees
    assert server.service.driver.running == []


def test_round_by_round_batching_answers_as_the_continuous_batch(server, tmp_path):
    # float32: a row's tokens do not depend on the rows beside it, nor on how the trees share the executor
    rounds = ServerThread(ApiService(tiny_options(tmp_path, batching="rounds"), tmp_path)).start()
    try:
        def ask(url: str, index: int) -> str:
            reply = httpx.post(url + "/v1/chat/completions", timeout=120, json={
                "model": "gsm8k/bfs", "messages": [{"role": "user", "content": f"What is {index} squared?"}],
                "max_tokens": 8, "seed": index})
            return reply.json()["choices"][0]["message"]["content"]

        with ThreadPoolExecutor(max_workers=8) as pool:
            continuous = list(pool.map(lambda i: ask(server.url, i), range(4)))
            by_rounds = list(pool.map(lambda i: ask(rounds.url, i), range(4)))
        assert by_rounds == continuous
    finally:
        rounds.stop()


def test_a_full_queue_answers_429(tmp_path):
    small = ServerThread(ApiService(tiny_options(tmp_path, concurrency=1), tmp_path, max_queue=1)).start()
    try:
        reply = httpx.post(small.url + "/v1/completions", timeout=30, json={
            "model": "gsm8k/self-consistency", "prompt": "What is 1 plus 1?", "n": 2, "max_tokens": 4})
        assert reply.status_code == 429 and reply.json()["error"]["code"] == "queue_full"
        assert int(reply.headers["retry-after"]) >= 1
    finally:
        small.stop()


@pytest.mark.parametrize("extension, param", [
    ({"n_thoughts": 200000}, "seed_tot.n_thoughts"), ({"n_thoughts": 10**9}, "seed_tot.n_thoughts"),
    ({"depth": 17}, "seed_tot.depth"), ({"breadth": 9}, "seed_tot.breadth"), ({"iterations": 65}, "seed_tot.iterations"),
    ({"value_samples": 17}, "seed_tot.value_samples"), ({"cot_samples": 65}, "seed_tot.cot_samples"),
    ({"escalate_samples": 65}, "seed_tot.escalate_samples"), ({"value_max_tokens": 8193}, "seed_tot.value_max_tokens"),
])
def test_every_seed_tot_setting_has_a_hard_cap(server, extension, param):
    reply = httpx.post(server.url + "/v1/chat/completions", timeout=10, json={
        "model": "gsm8k/bfs", "messages": [{"role": "user", "content": "What is 1 plus 1?"}], "seed_tot": extension})
    assert reply.status_code == 400 and reply.json()["error"]["param"] == param
    assert "less than or equal" in reply.json()["error"]["message"]


def test_a_request_over_the_work_budget_is_refused_before_any_work(server):
    driver = server.service.driver
    completed, budget = driver.completed, server.service.max_request_tokens
    body = {"model": "gsm8k/bfs", "messages": [{"role": "user", "content": "What is 1 plus 1?"}], 
            "seed_tot": {"n_thoughts": 32, "depth": 16, "breadth": 8, "value_max_tokens": 100}}
    reply = httpx.post(server.url + "/v1/chat/completions", timeout=10, json=body)
    error = reply.json()["error"]
    assert reply.status_code == 400 and error["code"] == "over_budget" and error["param"] == "seed_tot.n_thoughts"
    assert f"budget of {budget:,}" in error["message"] and "lower seed_tot.n_thoughts" in error["message"]
    assert driver.completed == completed and not driver.running and driver.queued == 0  # no tree was started
    n_heavy = {"model": "gsm8k/self-consistency", "messages": body["messages"], "n": 8, "max_tokens": 8192}
    # the server's default is 8 tokens per chain: 8192 is the setting furthest from it
    assert httpx.post(server.url + "/v1/chat/completions", timeout=10, json=n_heavy).json()["error"]["param"] == "max_tokens"


def test_the_model_card_states_the_caps_and_the_budget(server):
    card = httpx.get(server.url + "/v1/models/gsm8k/bfs", timeout=10).json()["seed_tot"]["limits"]
    assert card["max_request_tokens"] == server.service.max_request_tokens
    assert 0 < card["default_request_tokens"] <= card["max_request_tokens"]
    assert card["seed_tot"]["n_thoughts"] == 32 and card["seed_tot"]["breadth"] == 8 and "iterations" not in card["seed_tot"]
    assert (card["n"], card["max_tokens"]) == (8, 8192)


def test_the_body_limit_holds_while_reading(server):
    """Refused by its Content-Length before a byte of it is read, and a body without a length is
    cut off at the limit (413 either way)."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Content-Length: 2097152\r\n\r\n")
        assert sock.recv(100).startswith(b"HTTP/1.1 413")

    def chunks():
        for _ in range(40):
            yield b"x" * 65536

    reply = httpx.post(server.url + "/v1/chat/completions", content=chunks(), timeout=10)
    assert reply.status_code == 413 and reply.json()["error"]["code"] == "body_too_large"


LONG_TREE = {"model": "gsm8k/bfs", "max_tokens": 200, "temperature": 1.0,
             "seed_tot": {"n_thoughts": 3, "depth": 4, "cot_samples": 4, "value_samples": 3}}


def sse_events(response):
    """The JSON events of a server-sent event stream, as they arrive ([DONE] ends it)."""
    for line in response.iter_lines():
        if line == "data: [DONE]":
            return
        if line.startswith("data: "):
            yield json.loads(line.removeprefix("data: "))


def streamed_answer(events) -> tuple[str, int]:
    """(content, completion tokens) of a streamed chat reply with include_usage."""
    events = list(events)
    content = "".join(e["choices"][0]["delta"].get("content") or "" for e in events if e["choices"])
    return content, events[-1]["usage"]["completion_tokens"]


def wait_until_gone(driver, job_id: str, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while any(job.job_id == job_id for job in driver.running) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert all(job.job_id != job_id for job in driver.running)


def test_a_client_that_goes_away_cancels_its_tree_only(server):
    """Tree A streams, tree B shares the batch; A's client leaves mid-way. B's answer is token for
    token its answer alone (float32), and A's rows leave the batch with its job."""
    driver = server.service.driver
    other = {"model": "gsm8k/bfs", "messages": [{"role": "user", "content": "What is 9 minus 4?"}],
             "max_tokens": 32, "seed": 2, "stream": True, "stream_options": {"include_usage": True},
             "seed_tot": {"n_thoughts": 3, "depth": 3}}
    url = server.url + "/v1/chat/completions"
    with httpx.stream("POST", url, json=other, timeout=120) as alone:
        expected = streamed_answer(sse_events(alone))
    cancelled_before = driver.rows_cancelled
    long = dict(LONG_TREE, messages=[{"role": "user", "content": "Count to one thousand, slowly."}], seed=3,
                stream=True)
    with httpx.Client(timeout=60) as leaving, httpx.Client(timeout=120) as staying:
        a = leaving.send(leaving.build_request("POST", url, json=long), stream=True)
        a_events = sse_events(a)
        trace_id = next(a_events)["id"].removeprefix("chatcmpl-")
        next(e for e in a_events if "progress" in (e.get("seed_tot") or {}))  # A's tree is being grown
        b = staying.send(staying.build_request("POST", url, json=other), stream=True)
        b_events = sse_events(b)
        next(e for e in b_events if "progress" in (e.get("seed_tot") or {}))  # B's tree too
        a.close()  # A's client goes away
        assert streamed_answer(b_events) == expected
        b.close()
    wait_until_gone(driver, trace_id)
    assert driver.rows_cancelled > cancelled_before  # A's unfinished requests were taken out of the batch
    health = httpx.get(server.url + "/health", timeout=10).json()
    assert health["rows"] == 0 and health["running"] == 0  # B ended; nothing of A still decodes
    assert not server.service.trace_file(trace_id).exists()  # the cancelled tree left no trace


def test_a_waiting_client_that_goes_away_cancels_its_tree(server):
    driver = server.service.driver
    body = dict(LONG_TREE, messages=[{"role": "user", "content": "Count the stars, one by one."}], seed=5)
    cancelled_before = driver.rows_cancelled
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(server.url + "/v1/chat/completions", json=body, timeout=httpx.Timeout(10, read=0.5))
    running = list(driver.running)
    assert len(running) == 1
    wait_until_gone(driver, running[0].job_id)
    assert driver.rows_cancelled > cancelled_before and driver.rows == 0
    traces = server.service.out / "traces"
    assert not [p for p in traces.iterdir() if json.loads(p.read_text())["question"] == body["messages"][0]["content"]]


def test_api_key_is_required_when_set(server):
    keyed = ServerThread(server.service, api_key="s3cret").start()
    try:
        with pytest.raises(openai.AuthenticationError):
            openai.OpenAI(base_url=keyed.url + "/v1", api_key="wrong", max_retries=0).models.list()
        assert httpx.get(keyed.url + "/v1/models", timeout=10).status_code == 401
        assert httpx.get(keyed.url + "/health", timeout=10).status_code == 200
        models = openai.OpenAI(base_url=keyed.url + "/v1", api_key="s3cret", max_retries=0).models.list()
        assert any(model.id == "gsm8k/bfs" for model in models)
    finally:
        keyed.stop(close_service=False)


@pytest.mark.parametrize("stop", [(signal.SIGTERM,), (signal.SIGINT,), (signal.SIGINT, signal.SIGINT)],
                         ids=["SIGTERM", "Ctrl-C", "Ctrl-C twice"])
def test_a_stop_signal_finishes_the_request_in_flight_and_exits_0(tmp_path, stop):
    port = free_port()
    command = [sys.executable, "-m", "seed_tot", "api", "--tiny", "--dtype", "float32", "--port", str(port),
               "--out", str(tmp_path), "--thoughts", "2", "--depth", "2", "--value-samples", "1",
               "--cot-samples", "1", "--max-new-tokens", "8", "--value-max-new-tokens", "4"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               env={**os.environ, "PYTHONUNBUFFERED": "1"})
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                if httpx.get(url + "/health", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert process.poll() is None and time.monotonic() < deadline, process.stdout.read()
            time.sleep(0.2)
        result = {}

        def ask():
            try:
                result["reply"] = httpx.post(url + "/v1/chat/completions", timeout=60, json={
                    "model": "gsm8k/bfs", "messages": [{"role": "user", "content": "What is 5 plus 5?"}],
                    "max_tokens": 32, "seed": 1, "seed_tot": {"n_thoughts": 3}})
            except httpx.TransportError as exc:  # the signal came before the request reached the server
                result["error"] = exc

        asker = threading.Thread(target=ask)
        asker.start()
        time.sleep(0.3)
        for sig in stop:
            process.send_signal(sig)
            time.sleep(0.05)
        asker.join(60)
        assert process.wait(60) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    reply = result.get("reply")
    if reply is None:  # refused before it reached the server, or (a second Ctrl-C) cut off
        assert isinstance(result["error"], httpx.ConnectError if len(stop) == 1 else httpx.TransportError)
    elif reply.status_code == 200:  # in flight when the signal came: finished, and its trace is on disk
        assert (tmp_path / "traces" / f"{reply.json()['seed_tot']['trace_id']}.json").is_file()
    else:  # the signal came first: refused cleanly; or a second Ctrl-C cut the request off (uvicorn's 500)
        assert reply.status_code in ((503,) if len(stop) == 1 else (500, 503)), reply.text


@requires_real_models
def test_the_default_models_answer_a_gsm8k_question(tmp_path):
    options = tiny_options(tmp_path, tiny=False, dtype="auto", max_new_tokens=None, value_max_new_tokens=128,
                           n_thoughts=3, depth=None, cot_samples=2, concurrency=4)
    running = ServerThread(ApiService(options, tmp_path)).start()
    try:
        client = openai.OpenAI(base_url=running.url + "/v1", api_key="unused", max_retries=0, timeout=1800)
        reply = client.chat.completions.create(model="gsm8k/self-consistency", seed=0, messages=[
            {"role": "user", "content": "Tom has 3 apples and buys 4 more. How many apples does he have now?"}])
        assert reply.model_extra["seed_tot"]["answer"] == "7"
        assert reply.choices[0].message.content.endswith("Answer: 7")
    finally:
        running.stop()


def one_gsm8k_trace(service: ApiService) -> dict:
    """Serve `service`, ask gsm8k/self-consistency one question, return the request's trace."""
    running = ServerThread(service).start()
    try:
        client = openai.OpenAI(base_url=running.url + "/v1", api_key="unused", max_retries=0, timeout=60)
        reply = client.chat.completions.create(model="gsm8k/self-consistency", seed=3, messages=[
            {"role": "user", "content": "Tom has 3 apples and buys 4 more. How many apples does he have?"}])
        return trace_of(running, reply.model_extra["seed_tot"]["trace_id"])
    finally:
        running.stop()


def test_a_learned_judge_rates_every_chain_of_a_request(tmp_path):
    from seed_tot.models.loading import load_model
    from value_heads import tiny_value_head

    head = tiny_value_head(load_model("tiny-target"), tmp_path / "head.safetensors")
    service = ApiService(tiny_options(tmp_path, value_mode="learned", value_model=str(head), vote_weight="value"),
                         tmp_path)
    assert "gsm8k/self-consistency" in service.catalog
    assert not any(m.startswith("creative-writing/") for m in service.catalog)  # no chain prompt to read states by
    trace = one_gsm8k_trace(service)
    assert trace["config"]["value_head"]["id"] == "tiny-head"
    assert trace["config"]["search"]["value_mode"] == "learned"
    rated = [n for n in trace["nodes"][1:] if n["value"] is not None]
    assert rated and all(0.0 < n["value"] < 1.0 for n in rated)


def test_a_task_judged_by_default_gets_the_judge_without_a_server_value_mode(tmp_path, monkeypatch):
    """GSM8K's self-consistency is judged by default where a head ships for the target: the server
    must load the judge for it although its own --value-mode is unset (here a tiny head stands in
    for a packaged one)."""
    from seed_tot.models.loading import load_model
    from seed_tot.values import judge
    from value_heads import tiny_value_head

    head = tiny_value_head(load_model("tiny-target"), tmp_path / "head.safetensors")
    monkeypatch.setattr(judge, "ships_head_for", lambda name: name == "tiny-target")
    monkeypatch.setattr(judge, "packaged_head", lambda fingerprint: head)
    service = ApiService(tiny_options(tmp_path), tmp_path)
    assert service.catalog["gsm8k/self-consistency"].config.value_mode == "learned"
    assert service.catalog["gsm8k/self-consistency"].config.vote_weight == "value"
    assert service.catalog["gsm8k/self-consistency"].config.escalate_samples == 4
    assert service.catalog["gsm8k/bfs"].config.escalate_samples == 0
    assert service.catalog["gsm8k/bfs"].config.vote_weight == "leaf"
    trace = one_gsm8k_trace(service)
    assert trace["config"]["value_head"]["id"] == "tiny-head"
    assert [n for n in trace["nodes"][1:] if n["value"] is not None]


@pytest.mark.parametrize("args,needle", [
    (["--port", "0"], "--port must be between 1 and 65535"),
    (["--value-model", "head.safetensors"], "--value-model applies to --value-mode learned"),
    (["--search", "bfs"], "each model id names its search"),
    (["--concurrency", "0"], "--concurrency must be at least 1"),
    (["--max-request-tokens", "0"], "--max-request-tokens must be at least 1"),
])
def test_bad_server_options_end_in_one_sentence(tmp_path, args, needle):
    from click.testing import CliRunner

    from seed_tot.cli import main

    result = CliRunner().invoke(main, ["api", "--tiny", "--out", str(tmp_path), "--port", str(free_port()), *args])
    assert result.exit_code == 2 and needle in result.output
