"""SEED's sampled output has exactly the target's distribution: chi-square of the first three
tokens against the exact joint p(a) p(b|a) p(c|ab), on a vocab-8 pair whose draft differs
clearly from the target (so rejections and residuals happen at every tree depth).

Every request runs through the real executor (spawned draft workers, FCFS verify queue, target
caches, commits). Requests ask for 4 tokens so the first round drafts the whole (2,2,1) or
(3,2,1) tree: the three tested tokens are decided by depth-1, -2 and -3 verification.

Negative controls inject a wrong rule into the same executor and must fail the same test:
always accepting the draft, resampling from p instead of the residual, and verifying depth-2 or
depth-3 nodes with the root's q instead of their own.
"""

from __future__ import annotations

import itertools
from collections import Counter

import pytest
import torch
from scipy.stats import chisquare

import seed_tot.scheduling.seed.verifier as seed_verifier
from seed_tot.config import DecodeConfig
from seed_tot.decoding.sampling import probabilities
from seed_tot.decoding.verify import DraftTree
from seed_tot.runtime import ModelRunner
from seed_tot.requests import GenerationRequest
from seed_tot.scheduling.seed import SeedExecutor, SeedOptions
from seed_tot.scheduling.seed.worker import TinyDraft
from conftest import SMALL_VOCAB
from test_distribution import always_accept, resample_from_p

pytestmark = pytest.mark.slow  # thousands of SEED requests

VOCAB = SMALL_VOCAB
NOISE = 0.1  # total variation between draft and target ~0.3 at T=1 (see test_distribution.py)
PROMPT = [1, 2, 3, 1, 2]
TESTED = 3  # tokens whose joint is tested
SAMPLES = 1_000  # each wrong rule below fails at this size (p < 1e-6; at 2,000 samples p < 1e-86)
PASS, FAIL = 1e-3, 1e-6


@pytest.fixture(scope="module")
def target(small_vocab_pair) -> ModelRunner:
    return small_vocab_pair(seed=0, noise=NOISE)[1]


@pytest.fixture(scope="module")
def executor(target):
    ex = SeedExecutor(target, TinyDraft(seed=0, vocab_size=VOCAB, noise=NOISE), num_workers=2)
    yield ex
    ex.close()


def exact_joint(target: ModelRunner, temperature: float, top_p: float) -> dict[tuple[int, ...], float]:
    """p(a) p(b|a) p(c|ab) for every 3-token path, from one batched forward."""
    prefixes = list(itertools.product(range(VOCAB), repeat=TESTED - 1))
    logits = target.forward(torch.tensor([PROMPT + list(p) for p in prefixes]), cache=None)
    start = len(PROMPT) - 1
    probs = probabilities(logits[:, start : start + TESTED], temperature, top_p)  # [prefix, step, vocab]
    joint = {}
    for row, prefix in enumerate(prefixes):
        head = 1.0
        for step, token in enumerate(prefix):
            head *= float(probs[row, step, token])
        for last in range(VOCAB):
            joint[prefix + (last,)] = head * float(probs[row, TESTED - 1, last])
    return joint


def chi_square_p_value(samples: list[tuple[int, ...]], joint: dict[tuple[int, ...], float]) -> float:
    """Goodness of fit over 3-token cells; cells expected fewer than 5 times are pooled."""
    counts, n = Counter(samples), len(samples)
    observed, expected, pooled_o, pooled_e = [], [], 0, 0.0
    for path, p in joint.items():
        e, o = p * n, counts.get(path, 0)
        if e == 0.0:
            assert o == 0, f"sampled {path}, which has probability 0"
        elif e < 5:
            pooled_o, pooled_e = pooled_o + o, pooled_e + e
        else:
            observed.append(o)
            expected.append(e)
    if pooled_e > 0:
        observed.append(pooled_o)
        expected.append(pooled_e)
    scale = sum(observed) / sum(expected)
    return float(chisquare(observed, [e * scale for e in expected]).pvalue)


def seed_samples(executor, k_config, temperature, top_p) -> list[tuple[int, ...]]:
    executor.options = SeedOptions(k_config=k_config)
    config = DecodeConfig(max_new_tokens=TESTED + 1, temperature=temperature, top_p=top_p)
    results = executor.run([GenerationRequest(PROMPT, config, seed=i) for i in range(SAMPLES)])
    return [tuple(r.token_ids[:TESTED]) for r in results]


# ----------------------------------------------------------------------------- wrong rules


def depth_of(tree: DraftTree, node: int) -> int:
    depth = 0
    while node >= 0:
        depth, node = depth + 1, tree.parents[node]
    return depth


def with_root_q_at(depth: int):
    """WRONG: a SeedSession._tree that gives every node at `depth` the root's q (the draft's
    distribution at the first position) instead of its own."""
    real_tree = seed_verifier.SeedSession._tree

    def tree_with_wrong_q(run, draft) -> DraftTree:
        tree = real_tree(run, draft)
        if not tree.children(-1):
            return tree
        root_q = tree.draft_probs[tree.children(-1)[0]]
        probs = [root_q if depth_of(tree, n) == depth else q for n, q in enumerate(tree.draft_probs)]
        return DraftTree(list(tree.tokens), list(tree.parents), probs)

    return tree_with_wrong_q


# ----------------------------------------------------------------------------- tests


@pytest.mark.parametrize(
    "k_config,temperature,top_p", [((2, 2, 1), 1.0, 1.0), ((3, 2, 1), 0.8, 0.9)], ids=str
)
def test_seed_first_three_tokens_follow_the_target(executor, target, k_config, temperature, top_p):
    samples = seed_samples(executor, k_config, temperature, top_p)
    assert chi_square_p_value(samples, exact_joint(target, temperature, top_p)) > PASS


@pytest.mark.parametrize(
    "mutation",
    [
        ("verify_tree", always_accept),
        ("verify_tree", resample_from_p),
        ("_tree", with_root_q_at(2)),
        ("_tree", with_root_q_at(3)),
    ],
    ids=["always-accept", "resample-from-p", "root-q-at-depth-2", "root-q-at-depth-3"],
)
def test_wrong_rule_in_the_executor_fails(executor, target, monkeypatch, mutation):
    name, wrong = mutation
    monkeypatch.setattr(seed_verifier.SeedSession if name == "_tree" else seed_verifier, name, wrong)
    samples = seed_samples(executor, (2, 2, 1), 1.0, 1.0)
    assert chi_square_p_value(samples, exact_joint(target, 1.0, 1.0)) < FAIL


# ----------------------------------------------------------------------------- later rounds

LATER = 4  # index of a token that no first round decides: a (2,2,1) round emits at most 4 tokens


def exact_first_and_later(target: ModelRunner, temperature: float, top_p: float) -> dict[tuple[int, int], float]:
    """p(first token, token LATER) summed over the tokens between, from one batched forward."""
    prefixes = list(itertools.product(range(VOCAB), repeat=LATER))
    logits = target.forward(torch.tensor([PROMPT + list(p) for p in prefixes]), cache=None)
    start = len(PROMPT) - 1
    probs = probabilities(logits[:, start : start + LATER + 1], temperature, top_p)  # [prefix, step, vocab]
    steps = probs[:, :LATER].gather(2, torch.tensor(prefixes).unsqueeze(-1)).squeeze(-1).double()
    heads = steps.prod(dim=1)  # p(prefix)
    joint = {}
    for row, prefix in enumerate(prefixes):
        for last in range(VOCAB):
            key = (prefix[0], last)
            joint[key] = joint.get(key, 0.0) + float(heads[row]) * float(probs[row, LATER, last])
    return joint


def reusing_the_verify_seed(real_verify):
    """WRONG: every verification round draws from a generator reset to the same seed."""

    def verify(tree, probs, generator):
        generator.manual_seed(12345)
        return real_verify(tree, probs, generator)

    return verify


def first_and_later_samples(executor) -> list[tuple[int, int]]:
    executor.options = SeedOptions(k_config=(2, 2, 1))
    config = DecodeConfig(max_new_tokens=LATER + 2, temperature=1.0, top_p=1.0)
    results = executor.run([GenerationRequest(PROMPT, config, seed=i) for i in range(SAMPLES)])
    return [(r.token_ids[0], r.token_ids[LATER]) for r in results]


def test_tokens_decided_after_the_first_round_follow_the_target(executor, target):
    samples = first_and_later_samples(executor)
    assert chi_square_p_value(samples, exact_first_and_later(target, 1.0, 1.0)) > PASS


def test_reusing_the_verify_seed_every_round_fails(executor, target, monkeypatch):
    monkeypatch.setattr(seed_verifier, "verify_tree", reusing_the_verify_seed(seed_verifier.verify_tree))
    samples = first_and_later_samples(executor)
    assert chi_square_p_value(samples, exact_first_and_later(target, 1.0, 1.0)) < FAIL
