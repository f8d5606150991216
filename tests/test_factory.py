"""make_executor builds every method, and refuses bad methods and options in one sentence."""

import pytest

from seed_tot.config import DecodeConfig
from seed_tot.decoding.autoregressive import autoregressive_decode
from seed_tot.errors import ConfigError
from seed_tot.scheduling.factory import make_executor
from seed_tot.scheduling.methods import METHOD_NAMES
from seed_tot.requests import GenerationRequest

EXACT_IN_PROCESS = ["ar", "sd", "mcsd", "batched", "batched-sd", "batched-mcsd", "batched-lookup", "lookahead", "jacobi", "hf-generate"]


def greedy_requests(tokenizer):
    config = DecodeConfig(max_new_tokens=12)
    return [
        GenerationRequest(tokenizer.encode(text), config, seed=i, request_id=f"q{i}")
        for i, text in enumerate(["Hello world", "Hello world", "Another prompt"])
    ]


@pytest.mark.parametrize("method", EXACT_IN_PROCESS)
def test_exact_methods_build_and_match_ar(tiny_pair, method):
    draft, target = tiny_pair
    requests = greedy_requests(target.tokenizer)
    executor = make_executor(method, target, draft)
    try:
        assert executor.name.startswith(method.split("-")[0])
        results = executor.run(requests)
    finally:
        executor.close()
    expected = [autoregressive_decode(target, r.prompt_ids, r.config, r.seed).token_ids for r in requests]
    assert [r.token_ids for r in results] == expected
    assert [r.request_id for r in results] == ["q0", "q1", "q2"]


def test_fastcot_builds_and_runs(tiny_pair):
    draft, target = tiny_pair
    executor = make_executor("fastcot", target, window=4, max_iterations=3)
    results = executor.run(greedy_requests(target.tokenizer)[:1])
    assert executor.name == "fastcot" and results[0].token_ids


def test_options_reach_the_executor(tiny_pair):
    draft, target = tiny_pair
    batched = make_executor("batched-sd", target, draft, k=3, adaptive_k=True, max_k=5, share_prefix=False)
    assert batched.k_config == (1, 1, 1) and batched.adaptive_k and batched.max_k == 5 and not batched.share_prefix
    assert make_executor("batched-mcsd", target, draft).k_config == (2, 2, 1)
    assert make_executor("sd", target, draft, k=2).name == "sd(k=2)"
    # a draft given by name is loaded in the target's dtype
    assert make_executor("batched-sd", target, "tiny-draft", k_config="2,1").draft.dtype == target.dtype


def test_seed_methods_build_without_starting_processes(tiny_pair):
    draft, target = tiny_pair
    for method, shape in (("seed", (1, 1, 1)), ("seed-mcsd", (2, 2, 1))):
        executor = make_executor(method, target, draft, num_workers=2, batched_verify=True)
        try:
            assert executor.name == method
            assert executor.options.k_config == shape and executor.options.batched_verify
            assert executor.num_workers == 2 and executor.worker_pids == []
            assert executor.last_events == []
        finally:
            executor.close()


def test_unknown_method_lists_the_valid_ones(tiny_pair):
    with pytest.raises(ConfigError) as error:
        make_executor("beam", tiny_pair[1])
    message = str(error.value)
    assert all(method in message for method in METHOD_NAMES)


@pytest.mark.parametrize(
    "method, kwargs, match",
    [
        ("sd", {}, "needs a draft"),
        ("seed", {}, "needs a draft"),
        ("batched", {"k": 3}, "no option k"),
        ("batched-sd", {"k": 2, "k_config": "2,1"}, "either k or k_config"),
        ("batched-sd", {"k_config": "0"}, "k_config"),
        ("jacobi", {"window": 3}, "no option window"),
        ("ar", {"share_prefix": True}, "options are none"),
    ],
)
def test_bad_settings_are_one_sentence(tiny_pair, method, kwargs, match):
    draft, target = tiny_pair
    use_draft = draft if method not in ("sd", "seed") else None
    with pytest.raises(ConfigError, match=match):
        make_executor(method, target, use_draft, **kwargs)
