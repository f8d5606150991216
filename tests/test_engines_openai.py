"""The OpenAI-compatible client (--server-api openai) against a real server: llama.cpp's own
`/v1/completions`, on the tiny pair's target written as float32 GGUF.

llama.cpp answers that endpoint with text only, never the generated token ids, so the client
refuses it on connect in one sentence (after the tokenizer check, which works on it). What the
client asks for is still checked here for real: the OpenAI request body, posted as it is, makes
the server generate exactly what the llama.cpp body makes it generate (greedy, stop strings, EOS,
ignore_eos, seeded sampling), and greedy equals the project's own AR of the tiny target.
"""

from __future__ import annotations

import pytest
from engine_helpers import PROMPTS, requests_for, reversed_byte_tokenizer, tiny_server

from seed_tot.config import DecodeConfig
from seed_tot.decoding.autoregressive import autoregressive_decode
from seed_tot.engines import llama_api, openai_api
from seed_tot.engines.connect import PROBE_TEXT, _openai_info, connect, server_tokens
from seed_tot.engines.http import call_json
from seed_tot.engines.server_executor import ServerExecutor
from seed_tot.errors import EngineError, TokenizerMismatchError
from seed_tot.models.tiny import byte_tokenizer

GREEDY = DecodeConfig(max_new_tokens=48)


def one_sentence(message: str) -> bool:
    body = message.rstrip(".")
    return "\n" not in message and message.endswith(".") and ". " not in body.replace("e.g. ", "")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with tiny_server(tmp_path_factory.mktemp("gguf"), slots=1) as running:  # one slot: seeded sampling is reproducible
        yield running


def both_endpoints(url: str, request) -> tuple[dict, dict]:
    """The OpenAI body on /v1/completions and the llama.cpp body on /completion, same request."""
    model = _openai_info(url, 10.0).model
    openai_reply = call_json(url, openai_api.PATH, openai_api.completion_body(request, model))
    llama_reply = call_json(url, llama_api.PATH, llama_api.completion_body(request))
    return openai_api.choice(openai_reply) | {"usage": openai_reply["usage"]}, llama_reply  # the choice, with usage


def test_connect_checks_the_tokenizer_then_refuses_text_only_replies(server):
    tokenizer = byte_tokenizer()
    info = _openai_info(server.url, 10.0)
    assert info.api == "openai" and info.record["engine"] == "llamacpp"
    local = tokenizer.encode(PROBE_TEXT, add_special_tokens=False)
    assert server_tokens(info, PROBE_TEXT, 10.0) == local  # the probe reaches llama.cpp's /tokenize
    with pytest.raises(TokenizerMismatchError):
        connect(server.url, reversed_byte_tokenizer(), "openai")
    with pytest.raises(EngineError) as refused:
        connect(server.url, tokenizer, "openai")
    message = str(refused.value)
    assert one_sentence(message) and "token ids" in message and "--server-api llama.cpp" in message


def test_a_text_only_reply_is_never_re_encoded(server):
    """An executor built without connect() (Python API) stops at the first text-only reply."""
    tokenizer = byte_tokenizer()
    executor = ServerExecutor(_openai_info(server.url, 10.0), tokenizer, parallel=1, retries=0)
    try:
        with pytest.raises(EngineError) as refused:
            executor.run(requests_for(GREEDY)[:1])
    finally:
        executor.close()
    assert one_sentence(str(refused.value)) and "token ids" in str(refused.value)


def test_greedy_openai_body_generates_what_the_llama_body_and_project_ar_generate(server, tiny_pair):
    _, target = tiny_pair
    for request in requests_for(GREEDY):
        openai_choice, llama_reply = both_endpoints(server.url, request)
        reference = autoregressive_decode(target, request.prompt_ids, GREEDY)
        assert llama_reply["tokens"] == reference.token_ids, request.request_id
        assert openai_choice["text"] == llama_reply["content"], request.request_id
        assert openai_choice["usage"]["completion_tokens"] == len(reference.token_ids)
        assert openai_choice["finish_reason"] == "length"


def printable_pair(text: str, start: int) -> str:
    """Two printable ASCII characters of `text` from `start` on: a stop string the output is sure to contain."""
    for i in range(start, len(text) - 1):
        if all(" " <= ch <= "~" for ch in text[i : i + 2]):
            return text[i : i + 2]
    raise AssertionError("no printable pair in the greedy output")


def test_stop_strings_eos_and_ignore_eos_end_both_bodies_alike(server):
    request = requests_for(GREEDY)[0]
    _, full = both_endpoints(server.url, request)
    stop = printable_pair(full["content"], 10)
    stopped = requests_for(GREEDY.with_stop([stop]))[0]
    openai_choice, llama_reply = both_endpoints(server.url, stopped)
    assert llama_reply["stop_type"] == "word" and llama_reply["stopping_word"] == stop
    assert openai_choice["finish_reason"] == "stop" and openai_choice["text"] == llama_reply["content"]
    assert openai_choice["usage"]["completion_tokens"] == llama_reply["tokens_predicted"]

    long = DecodeConfig(max_new_tokens=400)
    ended = []
    for request in requests_for(long):
        openai_choice, llama_reply = both_endpoints(server.url, request)
        assert openai_choice["text"] == llama_reply["content"], request.request_id
        assert openai_choice["usage"]["completion_tokens"] == llama_reply["tokens_predicted"]
        if llama_reply["stop_type"] == "eos":
            assert openai_choice["finish_reason"] == "stop"
            ended.append(request.request_id)
    assert ended  # at least one prompt reaches EOS greedily within 400 tokens
    for request in requests_for(long.model_copy(update={"ignore_eos": True})):
        if request.request_id in ended:
            openai_choice, llama_reply = both_endpoints(server.url, request)
            assert openai_choice["finish_reason"] == "length" and llama_reply["stop_type"] == "limit"
            assert openai_choice["text"] == llama_reply["content"]
            assert openai_choice["usage"]["completion_tokens"] == 400


def test_seeded_sampling_is_reproducible_and_draws_what_the_llama_body_draws(server):
    """The OpenAI body's neutral samplers (top_k -1, min_p 0, ...) leave llama.cpp's chain at top-p
    then temperature, so a seed draws the same tokens through either endpoint."""
    sampled = DecodeConfig(max_new_tokens=40, temperature=1.0, top_p=0.9)
    first = [both_endpoints(server.url, r) for r in requests_for(sampled, seeds=[7] * len(PROMPTS))]
    second = [both_endpoints(server.url, r)[0] for r in requests_for(sampled, seeds=[7] * len(PROMPTS))]
    other = [both_endpoints(server.url, r)[0] for r in requests_for(sampled, seeds=[8] * len(PROMPTS))]
    texts = [openai_choice["text"] for openai_choice, _ in first]
    assert texts == [llama_reply["content"] for _, llama_reply in first]
    assert texts == [c["text"] for c in second]
    assert texts != [c["text"] for c in other]  # the seed reaches the sampler


def test_cached_prompt_tokens_are_read_from_usage_as_the_server_reports_them(server):
    """The same prompt twice: the second reply's usage.prompt_tokens_details.cached_tokens counts
    the prompt tokens the server reused, and the client reports that count (a reply without the
    field counts 0)."""
    request = requests_for(GREEDY)[0]
    model = _openai_info(server.url, 10.0).model
    body = openai_api.completion_body(request, model)
    call_json(server.url, openai_api.PATH, body)
    again = call_json(server.url, openai_api.PATH, body)
    reported = again["usage"].get("prompt_tokens_details", {}).get("cached_tokens")
    assert reported is not None, again["usage"]
    assert 0 < reported <= len(request.prompt_ids)
    assert openai_api.cached_prompt_tokens(again) == reported
    assert openai_api.cached_prompt_tokens({"choices": [{}], "usage": {"prompt_tokens": 3}}) == 0
