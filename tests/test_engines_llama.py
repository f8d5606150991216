"""A real llama.cpp server (the xllamacpp wheel) on the tiny pair written as float32 GGUF: what
the server executor returns is what one request at a time returns, what the project's own AR
decoding returns, and what speculative serving returns."""

from __future__ import annotations

import json

import pytest
from search_helpers import PROBLEM, TOKENIZER, make_task

from seed_tot.api import solve, to_trace
from seed_tot.config import DecodeConfig
from seed_tot.decoding.autoregressive import autoregressive_decode
from seed_tot.observe.trace import load_trace, write_trace
from engine_helpers import PROMPTS, executor_for, requests_for, tiny_server

GREEDY = DecodeConfig(max_new_tokens=48)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with tiny_server(tmp_path_factory.mktemp("gguf"), slots=4) as running:
        yield running


@pytest.fixture(scope="module")
def speculative_server(tmp_path_factory):
    with tiny_server(tmp_path_factory.mktemp("gguf"), slots=4, draft=True) as running:
        yield running


def one_at_a_time(url: str, requests):
    executor = executor_for(url, parallel=1)
    try:
        return [executor.run([request])[0] for request in requests]
    finally:
        executor.close()


@pytest.mark.parametrize("parallel", [2, 4, 6])
def test_parallel_greedy_equals_one_request_at_a_time(server, parallel):
    requests = requests_for(GREEDY)
    alone = one_at_a_time(server.url, requests)
    executor = executor_for(server.url, parallel=parallel)
    try:
        together = executor.run(requests)
    finally:
        executor.close()
    assert [r.request_id for r in together] == [r.request_id for r in requests]  # results in request order
    assert [r.token_ids for r in together] == [r.token_ids for r in alone]
    assert all(r.stats.new_tokens == len(r.token_ids) > 0 for r in together)


def test_session_returns_what_run_returns(server):
    requests = requests_for(GREEDY)
    executor = executor_for(server.url, parallel=3)
    try:
        session = executor.session()
        tickets = session.add(requests[:4])
        tickets += session.add(requests[4:])  # joins while the first ones decode
        results = {}
        while session.busy:
            results.update(session.step())
        expected = executor.run(requests)
    finally:
        executor.close()
    assert [results[t].token_ids for t in tickets] == [r.token_ids for r in expected]


def test_float32_gguf_greedy_equals_project_ar(server, tiny_pair):
    """llama.cpp's float32 CPU arithmetic differs from torch's in the last bits, but the tiny
    model's top two logits never come that close on these prompts: every token agrees."""
    _, target = tiny_pair
    requests = requests_for(GREEDY)
    served = one_at_a_time(server.url, requests)
    for request, result in zip(requests, served):
        reference = autoregressive_decode(target, request.prompt_ids, request.config)
        assert result.token_ids == reference.token_ids, request.request_id
        assert result.finish_reason == reference.finish_reason
        assert result.text == target.decode(reference.token_ids)


def test_stop_strings_end_where_project_ar_ends(server, tiny_pair):
    _, target = tiny_pair
    request = requests_for(GREEDY)[0]
    full = target.decode(autoregressive_decode(target, request.prompt_ids, GREEDY).token_ids)
    stop = full[10:12]  # a string the greedy continuation is sure to write
    config = GREEDY.with_stop([stop])
    reference = autoregressive_decode(target, request.prompt_ids, config)
    result = one_at_a_time(server.url, requests_for(config)[:1])[0]
    assert reference.finish_reason == "stop"
    assert (result.token_ids, result.finish_reason) == (reference.token_ids, "stop")


def test_speculative_serving_equals_plain_greedy(server, speculative_server):
    requests = requests_for(GREEDY)
    plain = one_at_a_time(server.url, requests)
    executor = executor_for(speculative_server.url, parallel=4)
    try:
        speculative = executor.run(requests)
    finally:
        executor.close()
    assert [r.token_ids for r in speculative] == [r.token_ids for r in plain]
    proposed = sum(r.stats.draft_tokens_proposed for r in speculative)
    accepted = sum(r.stats.draft_tokens_accepted for r in speculative)
    assert proposed > 0 and 0 < accepted <= proposed  # the draft really ran


def test_seeded_sampling_at_one_slot_is_reproducible(tmp_path):
    sampled = DecodeConfig(max_new_tokens=40, temperature=1.0, top_p=0.9)
    with tiny_server(tmp_path, slots=1) as one_slot:
        first = one_at_a_time(one_slot.url, requests_for(sampled, seeds=[7] * len(PROMPTS)))
        second = one_at_a_time(one_slot.url, requests_for(sampled, seeds=[7] * len(PROMPTS)))
        other = one_at_a_time(one_slot.url, requests_for(sampled, seeds=[8] * len(PROMPTS)))
    assert [r.token_ids for r in first] == [r.token_ids for r in second]
    assert [r.token_ids for r in first] != [r.token_ids for r in other]  # the seed reaches the sampler
    assert len(PROMPTS) == len(first)


def test_reused_prompt_tokens_reach_the_trace(server, tmp_path):
    """llama.cpp's timings.cache_n of every request: in the node stats, the batch stats and the
    metrics of the trace; a trace written before the field existed still loads (as 0)."""
    task = make_task(depth=2)
    executor = executor_for(server.url, parallel=2)
    try:
        result = solve(task, PROBLEM, executor, TOKENIZER, search="bfs", n_thoughts=2, breadth=2, depth=2,
                       thought_decode=DecodeConfig(max_new_tokens=8, temperature=1.0),
                       value_decode=DecodeConfig(max_new_tokens=4))
    finally:
        executor.close()
    path = write_trace(tmp_path / "trace.json", to_trace(result, task, executor))
    trace = load_trace(path)
    total = trace.metrics.cached_prompt_tokens
    assert total > 0  # depth-2 prompts extend depth-1 prompts: the server reused their tokens
    assert sum(b.stats.cached_prompt_tokens for b in trace.batches) == total
    per_node = [s.cached_prompt_tokens for n in trace.nodes for s in (n.generation, n.evaluation) if s is not None]
    assert 0 < sum(per_node) <= total  # the requests that made or rated nodes (no CoT requests here)

    old = json.loads(path.read_text())
    for record in [old["metrics"], *(b["stats"] for b in old["batches"]),
                   *(n[k] for n in old["nodes"] for k in ("generation", "evaluation") if n[k])]:
        del record["cached_prompt_tokens"]
    path.write_text(json.dumps(old))
    assert load_trace(path).metrics.cached_prompt_tokens == 0
