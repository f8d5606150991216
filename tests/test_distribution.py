"""Sampled speculative decoding keeps the target distribution exactly (chi-square, vocab-8 pair).

Running the real decoder 20,000 times costs minutes (HF forward overhead), so the test has
two halves that together cover the real code path:

1. `simulate` replays one request (max_new_tokens=2) with the real `draft_children`,
   `verify_tree` and drafters, but reads the model distributions from tables computed by
   enumeration (one batched forward over every 2-token continuation). 20,000 replays give
   the joint distribution of the first two tokens; a chi-square test compares it with the
   exact target distribution p(a) p(b | a). A deliberately wrong acceptance rule run through
   the same harness must fail the same test (negative controls).
2. `test_real_decoder_equals_simulation` runs the real `speculative_decode` (caches, tree
   masks, commits, depth trimming, stop rule) and the simulation with the same seed: they
   must emit the same tokens, seed by seed, so the distribution proven in (1) is the real one.
"""

from __future__ import annotations

import itertools
from collections import Counter

import pytest
import torch
from scipy.stats import chisquare

from seed_tot.config import DecodeConfig
from seed_tot.decoding.drafters import PromptLookupDrafter
from seed_tot.decoding.sampling import probabilities, residual, sample, uniform
from seed_tot.decoding.drafters import speculative_decode
from seed_tot.decoding.speculative import draft_children, speculative_decode_with
from seed_tot.decoding.verify import DraftTree, Verdict, verify_tree
from seed_tot.runtime import ModelRunner
from conftest import SMALL_VOCAB

pytestmark = pytest.mark.slow  # 20,000-sample statistics

VOCAB = SMALL_VOCAB
PROMPT = [1, 2, 3, 1, 2]  # repeats an n-gram, so prompt lookup has something to propose
SAMPLES = 20_000
NEW_TOKENS = 2


@pytest.fixture(scope="module")
def pair(small_vocab_pair) -> tuple[ModelRunner, ModelRunner]:
    # More draft noise than the default tiny pair: p and q differ clearly (total variation
    # ~0.3 at T=1), so rejections and residuals are exercised and wrong rules are detectable.
    return small_vocab_pair(seed=0, noise=0.1)


def logits_table(runner: ModelRunner, prompt: list[int], depth: int) -> dict[tuple[int, ...], torch.Tensor]:
    """Logits after prompt + path for every path of up to `depth` tokens, by one batched forward."""
    paths = list(itertools.product(range(VOCAB), repeat=depth))
    ids = torch.tensor([prompt + list(path) for path in paths])
    logits = runner.forward(ids, cache=None)
    table: dict[tuple[int, ...], torch.Tensor] = {}
    for row, path in enumerate(paths):
        for length in range(depth + 1):
            table[path[:length]] = logits[row, len(prompt) - 1 + length]
    return table


class Tables:
    """Draft and target distributions of the vocab-8 pair after the prompt, for one T / top_p."""

    def __init__(self, draft: ModelRunner, target: ModelRunner, temperature: float, top_p: float):
        self.draft_logits = logits_table(draft, PROMPT, NEW_TOKENS)
        target_logits = logits_table(target, PROMPT, NEW_TOKENS + 1)
        self.target = {path: probabilities(lg, temperature, top_p) for path, lg in target_logits.items()}

    def exact_joint(self) -> torch.Tensor:
        """p(a) * p(b | a) over (a, b): the distribution autoregressive sampling has."""
        first = self.target[()]
        return torch.stack([first[a] * self.target[(a,)] for a in range(VOCAB)])


def node_path(tree: DraftTree, node: int) -> tuple[int, ...]:
    path = []
    while node >= 0:
        path.append(tree.tokens[node])
        node = tree.parents[node]
    return tuple(path[::-1])


def table_draft_tree(tables: Tables, generated: tuple[int, ...], k_config, temperature, top_p, generator) -> DraftTree:
    """draft_tree's sampling, level by level in the same order, with tabled draft logits."""
    tree = DraftTree()
    frontier = [-1]
    for k in k_config:
        next_frontier = []
        for node in frontier:
            base = generated + (node_path(tree, node) if node >= 0 else ())
            for token, q in draft_children(tables.draft_logits[base], k, temperature, top_p, generator):
                next_frontier.append(tree.add(token, node, q))
        frontier = next_frontier
    return tree


def simulate(tables: Tables, drafter_kind: str, k_config, temperature, top_p, generator, verify=verify_tree) -> tuple[int, ...]:
    """speculative_decode_with(max_new_tokens=2) with model distributions read from tables."""
    lookup = PromptLookupDrafter(VOCAB, num_tokens=len(k_config))
    generated: tuple[int, ...] = ()
    while len(generated) < NEW_TOKENS:
        remaining = NEW_TOKENS - len(generated)
        if drafter_kind == "lookup":
            context = PROMPT + list(generated)
            tree = lookup.propose(context[:-1], context[-1], remaining)
        else:
            tree = table_draft_tree(tables, generated, k_config[:remaining], temperature, top_p, generator)
        probs = torch.stack([tables.target[generated]] + [tables.target[generated + node_path(tree, n)] for n in range(len(tree))])
        verdict = verify(tree, probs, generator)
        generated = generated + tuple(verdict.accepted_tokens) + (verdict.next_token,)
    return generated[:NEW_TOKENS]


def always_accept(tree: DraftTree, target_probs: torch.Tensor, generator: torch.Generator) -> Verdict:
    """WRONG on purpose: accept the first child at every level (output follows the draft)."""
    node, path = -1, []
    while tree.children(node):
        node = tree.children(node)[0]
        path.append(node)
    return Verdict(path, [tree.tokens[i] for i in path], sample(target_probs[1 + node] if path else target_probs[0], generator))


def resample_from_p(tree: DraftTree, target_probs: torch.Tensor, generator: torch.Generator) -> Verdict:
    """WRONG on purpose: on rejection sample from p itself instead of the residual max(0, p - q)."""
    node, path = -1, []
    while True:
        p = target_probs[1 + node] if path else target_probs[0]
        accepted = None
        for child in tree.children(node):
            q = tree.draft_probs[child]
            if uniform(generator) < min(1.0, float(p[tree.tokens[child]] / q[tree.tokens[child]])):
                accepted = child
                break
        if accepted is None:
            return Verdict(path, [tree.tokens[i] for i in path], sample(p, generator))
        path.append(accepted)
        node = accepted


def chi_square_p_value(samples: list[tuple[int, ...]], exact: torch.Tensor) -> float:
    """Goodness of fit over (a, b) cells; cells expected < 5 times are pooled into one bin."""
    counts = Counter(samples)
    n = len(samples)
    observed, expected, pooled_obs, pooled_exp = [], [], 0.0, 0.0
    for a in range(VOCAB):
        for b in range(VOCAB):
            e = float(exact[a, b]) * n
            o = counts.get((a, b), 0)
            if e == 0.0:
                assert o == 0, f"sampled ({a}, {b}), which has probability 0"
            elif e < 5:
                pooled_obs, pooled_exp = pooled_obs + o, pooled_exp + e
            else:
                observed.append(o)
                expected.append(e)
    if pooled_exp > 0:
        observed.append(pooled_obs)
        expected.append(pooled_exp)
    scale = sum(observed) / sum(expected)  # float rounding only: the exact joint sums to 1
    return float(chisquare(observed, [e * scale for e in expected]).pvalue)


def run_samples(tables, drafter_kind, k_config, temperature, top_p, verify=verify_tree) -> list[tuple[int, ...]]:
    generator = torch.Generator().manual_seed(1234)
    return [simulate(tables, drafter_kind, k_config, temperature, top_p, generator, verify) for _ in range(SAMPLES)]


CASES = [
    ("model", (1, 1, 1), 1.0, 1.0),  # SD k=3
    ("model", (1, 1, 1), 0.2, 1.0),
    ("model", (2, 2, 1), 1.0, 1.0),  # MCSD
    ("model", (2, 2, 1), 0.2, 1.0),
    ("model", (3, 2, 1), 1.0, 0.8),  # top-p < 1
    ("lookup", (1, 1, 1), 1.0, 1.0),  # prompt lookup: one-hot q, exact for sampling too
]


@pytest.mark.parametrize("drafter_kind,k_config,temperature,top_p", CASES, ids=str)
def test_sampled_first_two_tokens_follow_the_target(pair, drafter_kind, k_config, temperature, top_p):
    tables = Tables(*pair, temperature, top_p)
    samples = run_samples(tables, drafter_kind, k_config, temperature, top_p)
    p_value = chi_square_p_value(samples, tables.exact_joint())
    assert p_value > 1e-3, p_value


@pytest.mark.parametrize("wrong_rule", [always_accept, resample_from_p], ids=lambda f: f.__name__)
def test_negative_control_wrong_rule_fails(pair, wrong_rule):
    tables = Tables(*pair, 1.0, 1.0)
    samples = run_samples(tables, "model", (2, 2, 1), 1.0, 1.0, verify=wrong_rule)
    assert chi_square_p_value(samples, tables.exact_joint()) < 1e-6


def test_pair_differs_enough_for_the_controls(pair):
    tables = Tables(*pair, 1.0, 1.0)
    q = torch.softmax(tables.draft_logits[()], -1)
    assert 0.5 * (q - tables.target[()]).abs().sum() > 0.1


@pytest.mark.parametrize(
    "k_config,temperature,top_p", [((2, 2, 1), 1.0, 1.0), ((1, 1, 1), 0.2, 1.0), ((3, 2, 1), 1.0, 0.8)], ids=str
)
def test_real_decoder_equals_simulation(pair, k_config, temperature, top_p):
    draft, target = pair
    tables = Tables(draft, target, temperature, top_p)
    config = DecodeConfig(max_new_tokens=NEW_TOKENS, temperature=temperature, top_p=top_p)
    for seed in range(120):
        real = speculative_decode(draft, target, PROMPT, config, k_config, seed=seed).token_ids
        replay = simulate(tables, "model", k_config, temperature, top_p, torch.Generator().manual_seed(seed))
        assert tuple(real) == replay, seed


def test_real_lookup_decoder_equals_simulation(pair):
    _, target = pair
    tables = Tables(*pair, 1.0, 1.0)
    config = DecodeConfig(max_new_tokens=NEW_TOKENS, temperature=1.0)
    for seed in range(120):
        drafter = PromptLookupDrafter(VOCAB, num_tokens=3)
        real = speculative_decode_with(drafter, target, PROMPT, config, seed=seed).token_ids
        replay = simulate(tables, "lookup", (1, 1, 1), 1.0, 1.0, torch.Generator().manual_seed(seed))
        assert tuple(real) == replay, seed


def test_residual_is_the_rejection_distribution():
    p = torch.tensor([0.5, 0.3, 0.2])
    q = torch.tensor([0.2, 0.5, 0.3])
    assert torch.allclose(residual(p, q), torch.tensor([1.0, 0.0, 0.0]))


def test_negative_control_wrong_match_rule_fails(pair):
    """The one-hot (lookup) case above checks the match rule: drawing again on a mismatch is caught."""
    from test_sampled_identity import match_then_redraw

    tables = Tables(*pair, 1.0, 1.0)
    samples = run_samples(tables, "lookup", (1, 1, 1), 1.0, 1.0, verify=match_then_redraw)
    assert chi_square_p_value(samples, tables.exact_joint()) < 1e-6
