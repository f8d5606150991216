"""SEED executor (spawned draft workers + FCFS verify queue) is lossless on the tiny float32 pair.

Greedy: token-identical to autoregressive decoding for every option combination.
Sampling: every emitted token follows the target's conditional distribution (randomized
probability integral transform over >= 20,000 tokens, chi-square on its histogram).
Workers are spawned once per module and reused; options change between runs.
"""

import logging
import time

import pytest
import torch
from scipy.stats import chisquare
from conftest import SMALL_VOCAB
from devices import TEST_DEVICE
from session_helpers import cancelled_midway, staggered

from seed_tot.config import DecodeConfig
from seed_tot.decoding.autoregressive import autoregressive_decode
from seed_tot.decoding.sampling import probabilities
from seed_tot.decoding.speculative import next_draft_depth as next_depth
from seed_tot.requests import GenerationRequest
from seed_tot.runtime import ModelRunner
import seed_tot.scheduling.seed.verifier as seed_verifier
from seed_tot.scheduling.events import intervals, summarize
from seed_tot.scheduling.seed import SeedExecutor, SeedOptions, shaped_k_config
from seed_tot.scheduling.seed.worker import TinyDraft, derive_seed, tree_size

SAME_PROMPT = list(b"Let us think step by step about ")
OTHER_PROMPTS = [list(b"Rate the partial solution 1-10: "), list(b"Q")]
MAX_DEPTH = 5  # adaptive runs; the workers' q buffers are sized for it once


def greedy_requests(target: ModelRunner) -> list[GenerationRequest]:
    """3 requests with one prompt (thought generation), 2 with others (evaluation); 5 > 2 workers."""
    requests = [GenerationRequest(SAME_PROMPT, DecodeConfig(max_new_tokens=24), seed=i) for i in range(3)]
    requests.append(GenerationRequest(OTHER_PROMPTS[0], DecodeConfig(max_new_tokens=31), seed=7))
    # a stop string taken from the reference continuation, so it does fire
    reference = autoregressive_decode(target, OTHER_PROMPTS[1], DecodeConfig(max_new_tokens=30)).token_ids
    stop = target.decode(reference[8:10])
    requests.append(GenerationRequest(OTHER_PROMPTS[1], DecodeConfig(max_new_tokens=30, stop=(stop,)), seed=8))
    return requests


class _Collect(logging.Handler):
    def __init__(self):
        super().__init__()
        self.messages: list[str] = []

    def emit(self, record):
        self.messages.append(record.getMessage())


@pytest.fixture(scope="module")
def executor(tiny_pair):
    """Two workers, started with INFO logging so their start-up records reach this process."""
    _, target = tiny_pair
    ex = SeedExecutor(
        target,
        TinyDraft(seed=0, device=TEST_DEVICE),
        num_workers=2,
        options=SeedOptions(k_config=(2, 2, 1), adaptive_k=True, max_depth=MAX_DEPTH),
    )
    collect, root, worker_log = _Collect(), logging.getLogger(), logging.getLogger("seed_tot.scheduling.seed.worker")
    old_level = root.level
    root.setLevel(logging.INFO)
    worker_log.addHandler(collect)
    try:
        ex.start()
        deadline = time.monotonic() + 10
        while len(collect.messages) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        root.setLevel(old_level)
        worker_log.removeHandler(collect)
    ex.worker_log_messages = collect.messages
    yield ex
    ex.close()


def test_worker_logs_reach_the_parent(executor):
    for index, pid in enumerate(executor.worker_pids):
        assert any(f"draft worker {index} (pid {pid}) loaded" in m for m in executor.worker_log_messages)


@pytest.fixture(scope="module")
def references(tiny_pair):
    _, target = tiny_pair
    requests = greedy_requests(target)
    return requests, [autoregressive_decode(target, r.prompt_ids, r.config, r.seed).token_ids for r in requests]


COMBOS = [
    dict(k_config=(1, 1, 1)),
    dict(k_config=(2, 2, 1)),
    dict(k_config=(1, 1, 1), discipline="round-robin"),
    dict(k_config=(2, 2, 1), discipline="round-robin", batched_verify=True),
    dict(k_config=(1, 1, 1), batched_verify=True, share_prefix=True),
    dict(k_config=(2, 2, 1), share_prefix=True, adaptive_k=True),
    dict(k_config=(1, 1, 1), adaptive_k=True, discipline="round-robin"),
    dict(k_config=(2, 2, 1), batched_verify=True, share_prefix=True, adaptive_k=True, discipline="round-robin"),
]


@pytest.mark.parametrize("combo", COMBOS, ids=lambda c: "-".join(f"{k}={v}" for k, v in c.items()))
def test_greedy_equals_autoregressive(executor, references, combo):
    requests, expected = references
    executor.options = SeedOptions(max_depth=MAX_DEPTH, **combo)
    results = executor.run(requests)
    assert [r.token_ids for r in results] == expected
    assert results[-1].finish_reason == "stop" and results[0].finish_reason == "length"
    for result, request in zip(results, requests):
        stats = result.stats
        assert stats.new_tokens == len(result.token_ids)
        assert 0 <= stats.draft_tokens_accepted <= stats.draft_tokens_proposed
        assert stats.target_forwards < stats.new_tokens  # speculation accepted something
        assert result.text == executor.target.decode(result.token_ids)
    # every draft was verified once, by the target, after it was enqueued
    events = executor.last_events
    summary = summarize(events)
    assert summary["drafts"] == summary["verifications"] > 0
    assert 0.0 < summary["target_busy_fraction"] <= 1.0
    assert summary["mean_queue_wait_s"] >= 0.0
    assert {w for w, _, _, _ in intervals(events, "draft_start", "draft_end")} == {0, 1}


def test_workers_are_reused_across_runs(executor, references):
    requests, expected = references
    executor.options = SeedOptions(max_depth=MAX_DEPTH)
    pids = executor.worker_pids
    executor.run(requests[:1])
    assert executor.worker_pids == pids and len(pids) == 2


def test_sampled_results_do_not_depend_on_the_schedule(executor, tiny_pair):
    """Per-request seeds: the same requests give the same samples under another discipline."""
    requests = [
        GenerationRequest(SAME_PROMPT, DecodeConfig(max_new_tokens=20, temperature=1.0, top_p=0.9), seed=s)
        for s in range(4)
    ]
    runs = []
    for options in (SeedOptions(k_config=(2, 2, 1)), SeedOptions(k_config=(2, 2, 1), discipline="round-robin", share_prefix=True)):
        executor.options = options
        runs.append([r.token_ids for r in executor.run(requests)])
    assert runs[0] == runs[1]
    assert len({tuple(t) for t in runs[0]}) > 1  # different seeds, different samples


JOINS = [0, 0, 2, 3, 9]  # verify step at which request i joins the session (2 workers: some wait, some join late)


@pytest.mark.parametrize("batched_verify", [False, True])
def test_greedy_requests_joining_a_running_session_equal_autoregressive(executor, references, batched_verify):
    """Continuous batching across searches: requests join the verify loop while others decode."""
    requests, expected = references
    executor.options = SeedOptions(k_config=(2, 2, 1), batched_verify=batched_verify, share_prefix=True)
    session = executor.session()
    found = staggered(session, requests, JOINS)
    assert [r.token_ids for r in found] == expected
    assert session.joins_while_busy >= 3 and not session.states and not session.prompt_caches


def test_cancelled_requests_free_their_workers_and_the_others_stay_exact(executor, references):
    """Request 0 is drafting on a worker, 2 waits for one, 4 has not joined: all three are
    cancelled; the worker drafting for 0 is freed by its next draft and serves request 3."""
    requests, expected = references
    executor.options = SeedOptions(k_config=(2, 2, 1), share_prefix=True)
    session = executor.session()
    found, width, kept = cancelled_midway(session, requests, first=3, steps=2, dropped=[0, 2, 4])
    assert width == kept
    assert {i: r.token_ids for i, r in found.items()} == {1: expected[1], 3: expected[3]}
    assert not session.states and {e.request for e in session.events} == {1, 3}  # tickets = indices here
    assert [r.token_ids for r in executor.run(requests)] == expected


def test_a_joining_request_that_shares_a_prompt_cache_unforked_is_caught(executor, references, monkeypatch):
    """Negative control: without the zero-copy fork, a request that joins later decodes on top of
    the tokens another request committed into the shared prompt cache, and the check above fails."""
    requests, expected = references
    executor.options = SeedOptions(k_config=(2, 2, 1), share_prefix=True)
    monkeypatch.setattr(seed_verifier, "fork_cache", lambda cache: cache)
    try:
        caught = [r.token_ids for r in staggered(executor.session(), requests, JOINS)] != expected
    except ValueError:  # or the runtime's cache-length check trips ("target cache holds N positions")
        caught = True
    assert caught


def sampled_requests() -> list[GenerationRequest]:
    return [GenerationRequest(prompt, DecodeConfig(max_new_tokens=16, temperature=1.0, top_p=0.9), seed=s)
            for s, prompt in enumerate([SAME_PROMPT, SAME_PROMPT, *OTHER_PROMPTS, SAME_PROMPT])]


def test_sampled_requests_joining_a_running_session_equal_each_alone(executor):
    executor.options = SeedOptions(k_config=(2, 2, 1), batched_verify=True, share_prefix=True)
    requests = sampled_requests()
    alone = [executor.run([r])[0].token_ids for r in requests]
    assert [r.token_ids for r in staggered(executor.session(), requests, JOINS)] == alone
    assert len({tuple(t) for t in alone}) == len(alone)


def test_a_verifier_seeded_by_join_order_is_caught(executor, monkeypatch):
    """Negative control: verification randomness taken from the ticket (join order) instead of
    the request's seed makes a request's sample depend on who else is in the session."""
    executor.options = SeedOptions(k_config=(2, 2, 1), batched_verify=True)
    requests = sampled_requests()
    alone = [executor.run([r])[0].token_ids for r in requests]
    new_state = seed_verifier.SeedSession._new_state

    def seeded_by_ticket(self, index, request):
        state = new_state(self, index, request)
        state.generator.manual_seed(index)
        return state

    monkeypatch.setattr(seed_verifier.SeedSession, "_new_state", seeded_by_ticket)
    assert [r.token_ids for r in staggered(executor.session(), requests, JOINS)] != alone


def test_a_session_left_mid_request_does_not_block_the_next(executor, references):
    requests, expected = references
    executor.options = SeedOptions()
    abandoned = executor.session()
    abandoned.add(requests[:2])
    abandoned.step()  # workers now hold requests that will never finish
    assert [r.token_ids for r in executor.run(requests)] == expected


def test_adaptive_depth_rule_and_tree_shapes():
    assert shaped_k_config((2, 2, 1), 2) == (2, 2)
    assert shaped_k_config((2, 2, 1), 5) == (2, 2, 1, 1, 1)
    assert tree_size((2, 2, 1)) == 10 and tree_size((1, 1, 1)) == 3
    assert next_depth(3, drafted=3, accepted=3, max_depth=5) == 4
    assert next_depth(5, drafted=5, accepted=5, max_depth=5) == 5
    assert next_depth(3, drafted=3, accepted=0, max_depth=5) == 2
    assert next_depth(1, drafted=1, accepted=0, max_depth=5) == 1
    assert next_depth(3, drafted=3, accepted=1, max_depth=5) == 3
    assert derive_seed(1, "draft") != derive_seed(1, "verify") != derive_seed(2, "verify")


# ----------------------------------------------------------------------------- distribution

VOCAB = SMALL_VOCAB
PROMPT = [3, 5]
TOKENS_PER_REQUEST = 500


@pytest.fixture(scope="module")
def small_vocab(small_vocab_pair):
    draft_runner, target_runner = small_vocab_pair(seed=0)
    ex = SeedExecutor(
        target_runner,
        TinyDraft(seed=0, vocab_size=VOCAB),
        num_workers=2,
        options=SeedOptions(k_config=(2, 2, 1), adaptive_k=True, max_depth=MAX_DEPTH),
    )
    yield target_runner, draft_runner, ex
    ex.close()


def pit_values(runner: ModelRunner, tokens: list[int], temperature: float, top_p: float, generator, shift: int = 0):
    """Randomized PIT u = F(x-1) + V p(x) of each generated token under runner's conditional
    distribution; i.i.d. uniform on (0, 1) exactly when the tokens were sampled from it."""
    logits = runner.forward(torch.tensor([PROMPT + tokens]), cache=None)[0]
    start = len(PROMPT) - 1 - shift  # shift > 0: the distributions of an earlier position (a wrong reference)
    probs = probabilities(logits[start : start + len(tokens)], temperature, top_p)
    index = torch.arange(len(tokens))
    chosen = torch.tensor(tokens)
    below = (probs.cumsum(-1) - probs)[index, chosen]
    return below + torch.rand(len(tokens), generator=generator) * probs[index, chosen]


def uniformity_p_value(u: torch.Tensor, bins: int = 20) -> float:
    counts = torch.histc(u.clamp(0, 1 - 1e-7), bins=bins, min=0.0, max=1.0)
    return float(chisquare(counts.numpy()).pvalue)


SAMPLING_RUNS = [
    (1.0, 1.0, SeedOptions(k_config=(2, 2, 1))),
    (0.7, 0.9, SeedOptions(k_config=(2, 2, 1), discipline="round-robin", batched_verify=True, adaptive_k=True, max_depth=MAX_DEPTH)),
]


@pytest.mark.slow
def test_sampling_follows_the_target_distribution(small_vocab):
    """>= 20,000 sampled tokens over two runs with different options; each run passes alone, and
    the same test with a wrong reference (the target's distribution one position early) fails."""
    target, _, ex = small_vocab
    generator = torch.Generator().manual_seed(1234)
    all_u, wrong_u = [], []
    for temperature, top_p, options in SAMPLING_RUNS:
        ex.options = options
        config = DecodeConfig(max_new_tokens=TOKENS_PER_REQUEST, temperature=temperature, top_p=top_p)
        requests = [GenerationRequest(PROMPT, config, seed=1000 * len(all_u) + i) for i in range(20)]
        results = ex.run(requests)
        u = torch.cat([pit_values(target, r.token_ids, temperature, top_p, generator) for r in results])
        assert len(u) == 20 * TOKENS_PER_REQUEST
        assert uniformity_p_value(u) > 0.001, (temperature, top_p, options)
        all_u.append(u)
        wrong_u.append(torch.cat([pit_values(target, r.token_ids[1:], temperature, top_p, generator, shift=1) for r in results]))
    assert uniformity_p_value(torch.cat(all_u)) > 0.001
    assert uniformity_p_value(torch.cat(wrong_u)) < 1e-6  # the test can fail
