"""SD / MCSD building blocks against full recomputation, and greedy equality with AR (tiny pair, float32)."""

import pytest
import torch

from seed_tot.config import DecodeConfig
from seed_tot.decoding.autoregressive import autoregressive_decode
from seed_tot.decoding.drafters import DraftModelDrafter, PromptLookupDrafter, lookup_continuation, speculative_decode
from seed_tot.decoding.speculative import (
    commit_draft,
    commit_target,
    draft_tree,
    speculative_decode_with,
    target_probs_for_tree,
)
from seed_tot.decoding.verify import verify_tree
from seed_tot.errors import ConfigError, SeedTotError
from seed_tot.runtime import ModelRunner, cache_length

from conftest import requires_real_models

TOL = 1e-4


def full_logits(runner: ModelRunner, ids: list[int]) -> torch.Tensor:
    """Logits of a forward without cache, on the CPU, where probabilities() puts its results."""
    return runner.forward(torch.tensor([ids]), cache=None)[0].cpu()


def path_to(tree, node: int) -> list[int]:
    path = []
    while node >= 0:
        path.append(tree.tokens[node])
        node = tree.parents[node]
    return path[::-1]


def prompt_tokens(seed: int, n: int) -> list[int]:
    return torch.randint(0, 256, (n,), generator=torch.Generator().manual_seed(seed)).tolist()


@pytest.mark.parametrize("k_config", [(1, 1, 1), (2, 2, 1), (3, 2, 1), (2, 2, 2, 1)])
@pytest.mark.parametrize("fill", [True, False])
def test_draft_tree_shape_forwards_and_greedy_children(tiny_pair, k_config, fill):
    draft, _ = tiny_pair
    context = prompt_tokens(1, 12)
    cache = draft.new_cache()
    draft.forward(torch.tensor([context[:-1]]), cache)
    tree, forwards = draft_tree(
        draft, cache, context[-1], k_config, 0.0, 1.0, torch.Generator().manual_seed(0), fill_last_level=fill
    )
    sizes, width = [], 1
    for k in k_config:
        width *= k
        sizes.append(width)
    assert len(tree) == sum(sizes)
    assert forwards == len(k_config) + (1 if fill else 0)
    last_level = sizes[-1]
    assert cache_length(cache) == len(context) + len(tree) - (0 if fill else last_level)
    for node in range(len(tree)):
        parent = tree.parents[node]
        parent_context = context + (path_to(tree, parent) if parent >= 0 else [])
        expected = full_logits(draft, parent_context)[-1].topk(len(tree.children(parent))).indices.tolist()
        siblings = [tree.tokens[c] for c in tree.children(parent)]
        assert siblings == expected
        assert tree.draft_probs[node][tree.tokens[node]] == 1.0


def test_draft_tree_without_last_level_leaves_it_out_of_cache(tiny_pair):
    draft, _ = tiny_pair
    context = prompt_tokens(2, 9)
    cache = draft.new_cache()
    tree, forwards = draft_tree(
        draft, cache, context, (2, 2, 1), 0.0, 1.0, torch.Generator().manual_seed(0), fill_last_level=False
    )
    assert forwards == 3
    assert cache_length(cache) == len(context) + 2 + 4  # levels 1 and 2 fed, level 3 not
    # accepted path reaching the last level: its last node is dropped, the rest is kept
    leaf = len(tree) - 1
    path = [tree.parents[tree.parents[leaf]], tree.parents[leaf], leaf]
    commit_draft(cache, len(context) - 1, tree, path)
    assert cache_length(cache) == len(context) + 2
    nxt = draft.forward(torch.tensor([[path_to(tree, leaf)[-1]]]), cache)[0, -1].cpu()
    assert (nxt - full_logits(draft, context + path_to(tree, leaf))[-1]).abs().max() < TOL


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_target_probs_and_commit_match_full_recomputation(tiny_pair, temperature):
    draft, target = tiny_pair
    context = prompt_tokens(3, 10)
    generator = torch.Generator().manual_seed(5)
    draft_cache, target_cache = draft.new_cache(), target.new_cache()
    draft.forward(torch.tensor([context[:-1]]), draft_cache)
    target.forward(torch.tensor([context[:-1]]), target_cache)
    tree, _ = draft_tree(draft, draft_cache, context[-1], (2, 2, 1), temperature, 1.0, generator)
    probs = target_probs_for_tree(target, target_cache, context[-1], tree, 1.0, 1.0)
    assert probs.shape == (1 + len(tree), target.vocab_size)
    assert (probs[0] - torch.softmax(full_logits(target, context)[-1], -1)).abs().max() < TOL
    for node in range(len(tree)):
        ref = torch.softmax(full_logits(target, context + path_to(tree, node))[-1], -1)
        assert (probs[1 + node] - ref).abs().max() < TOL
    for node in range(len(tree)):  # draft q of sampled children = draft softmax at the parent
        if temperature > 0:
            parent = tree.parents[node]
            ref = torch.softmax(full_logits(draft, context + (path_to(tree, parent) if parent >= 0 else []))[-1], -1)
            assert (tree.draft_probs[node] - ref).abs().max() < TOL
    verdict = verify_tree(tree, probs, generator)
    commit_target(target_cache, len(context) - 1, tree, verdict.accepted_nodes)
    commit_draft(draft_cache, len(context) - 1, tree, verdict.accepted_nodes)
    accepted = context + verdict.accepted_tokens
    for runner, cache in ((target, target_cache), (draft, draft_cache)):
        assert cache_length(cache) == len(accepted)
        nxt = runner.forward(torch.tensor([[verdict.next_token]]), cache)[0, -1].cpu()
        assert (nxt - full_logits(runner, accepted + [verdict.next_token])[-1]).abs().max() < TOL


def test_commit_target_refuses_a_cache_of_the_wrong_length(tiny_pair):
    draft, target = tiny_pair
    context = prompt_tokens(4, 6)
    cache = target.new_cache()
    target.forward(torch.tensor([context]), cache)
    tree, _ = draft_tree(draft, draft.new_cache(), context, (1, 1), 0.0, 1.0, torch.Generator())
    with pytest.raises(ValueError):
        commit_target(cache, len(context) - 1, tree, [0])


# ---------------------------------------------------------------- greedy: every decoder equals AR

SD_KS = [1, 2, 4, 6]
MCSD_CONFIGS = [(2, 2, 1), (3, 2, 1), (2, 2, 2, 1), (1, 1, 1)]
TEXTS = [
    "Hello world",
    "The answer is",
    "def f(x):\n    return",
    "a",
    "Q: 2+3=? A:",
    "aaaaaaaaaaaaaaaa",
    "abcabcabcabcabc",
    "Natural language reasoning with trees of thought.",
    "\n\n",
    "0123456789",
]


def greedy_cases(target: ModelRunner) -> list[tuple[list[int], DecodeConfig]]:
    """52 prompts of varied content and length (1..70 tokens); 12 with stop strings."""
    cases = [(target.encode(text), DecodeConfig(max_new_tokens=16)) for text in TEXTS]
    for seed in range(30):
        length = 1 + (seed * 23) % 70
        cases.append((prompt_tokens(100 + seed, length), DecodeConfig(max_new_tokens=6 + seed % 12)))
    for seed in range(12):  # stop string = a piece of the AR continuation, cut mid-way
        prompt = prompt_tokens(200 + seed, 5 + seed)
        reference = autoregressive_decode(target, prompt, DecodeConfig(max_new_tokens=16)).token_ids
        piece = target.decode(reference[3 + seed % 8 : 5 + seed % 8])
        stop = (piece,) if piece.strip() else ("\x00never",)
        cases.append((prompt, DecodeConfig(max_new_tokens=16, stop=stop)))
    return cases


@pytest.fixture(scope="module")
def greedy_reference(tiny_pair):
    _, target = tiny_pair
    cases = greedy_cases(target)
    return [(prompt, config, autoregressive_decode(target, prompt, config)) for prompt, config in cases]


def test_greedy_cases_cover_stops(greedy_reference):
    assert len(greedy_reference) >= 50
    assert sum(out.finish_reason == "stop" for _, _, out in greedy_reference) >= 5
    assert len({len(prompt) for prompt, _, _ in greedy_reference}) >= 25


@pytest.mark.parametrize("k_config", [(1,) * k for k in SD_KS] + MCSD_CONFIGS, ids=str)
def test_greedy_speculative_equals_autoregressive(tiny_pair, greedy_reference, k_config):
    draft, target = tiny_pair
    for prompt, config, reference in greedy_reference:
        out = speculative_decode(draft, target, prompt, config, k_config, seed=1)
        assert out.token_ids == reference.token_ids, (prompt, config)
        assert out.finish_reason == reference.finish_reason
        assert out.stats.new_tokens == len(out.token_ids)
        assert out.stats.target_forwards <= reference.stats.target_forwards + 1


def with_eos(runner: ModelRunner, eos: int) -> ModelRunner:
    other = ModelRunner(runner.model, runner.tokenizer, runner.name)
    other.eos_token_ids = frozenset({eos})
    return other


@pytest.mark.parametrize("k_config", [(1, 1, 1, 1), (2, 2, 1)], ids=str)
def test_greedy_eos_stops_where_autoregressive_stops(tiny_pair, k_config):
    draft, target = tiny_pair
    for seed in range(6):
        prompt = prompt_tokens(300 + seed, 4 + 3 * seed)
        free = autoregressive_decode(target, prompt, DecodeConfig(max_new_tokens=30)).token_ids
        eos = free[5 + seed]
        eos_target = with_eos(target, eos)
        reference = autoregressive_decode(eos_target, prompt, DecodeConfig(max_new_tokens=30))
        assert reference.finish_reason == "eos" and reference.token_ids[-1] == eos
        out = speculative_decode(draft, eos_target, prompt, DecodeConfig(max_new_tokens=30), k_config)
        assert out.token_ids == reference.token_ids
        assert out.finish_reason == "eos"


def test_one_one_one_is_sd_k3_also_when_sampling(tiny_pair):
    draft, target = tiny_pair
    config = DecodeConfig(max_new_tokens=20, temperature=1.0)
    prompt = target.encode("Hello")
    for seed in range(3):
        a = speculative_decode(draft, target, prompt, config, (1, 1, 1), seed=seed)
        b = speculative_decode(draft, target, prompt, config, "1,1,1", seed=seed)
        assert a.token_ids == b.token_ids
    outputs = {tuple(speculative_decode(draft, target, prompt, config, (2, 2, 1), seed=s).token_ids) for s in range(3)}
    assert len(outputs) > 1  # different seeds give different samples


def test_greedy_prompt_lookup_equals_autoregressive(tiny_pair, greedy_reference):
    _, target = tiny_pair
    accepted = 0
    for prompt, config, reference in greedy_reference:
        drafter = PromptLookupDrafter(target.vocab_size, num_tokens=4)
        out = speculative_decode_with(drafter, target, prompt, config, seed=0)
        assert out.token_ids == reference.token_ids
        accepted += out.stats.draft_tokens_accepted
    assert accepted > 0


def test_lookup_continuation_prefers_longest_recent_match():
    seq = [1, 2, 3, 9, 1, 2, 3, 7, 5, 2, 3]
    assert lookup_continuation(seq, 2, max_ngram=3, min_ngram=1) == [7, 5]
    assert lookup_continuation([4, 5, 6], 3, 3, 1) == []
    assert lookup_continuation(seq, 0, 3, 1) == []


def test_user_errors_are_clear(tiny_pair):
    draft, target = tiny_pair
    with pytest.raises(SeedTotError, match="prompt is empty"):
        autoregressive_decode(target, [], DecodeConfig())
    with pytest.raises(ConfigError, match="k_config"):
        speculative_decode(draft, target, [1, 2], DecodeConfig(), (2, 0))


def test_drafter_resyncs_after_foreign_context(tiny_pair):
    """A drafter handed a context it did not see (e.g. another branch) rolls back and refeeds."""
    draft, target = tiny_pair
    drafter = DraftModelDrafter(draft, (2, 1), 0.0, 1.0, torch.Generator())
    first = prompt_tokens(500, 10)
    drafter.propose(first[:-1], first[-1], 8)
    other = first[:4] + prompt_tokens(501, 5)
    tree = drafter.propose(other[:-1], other[-1], 8)
    expected = full_logits(draft, other)[-1].topk(2).indices.tolist()
    assert [tree.tokens[c] for c in tree.children(-1)] == expected


# ---------------------------------------------------------------- opt-in: the real default pair

REAL_QUESTIONS = [
    "Janet's ducks lay 16 eggs per day. She eats three for breakfast and bakes muffins with four. "
    "She sells the rest for $2 each. How much does she make every day?",
    "A robe takes 2 bolts of blue fiber and half that much white fiber. How many bolts in total does it take?",
    "Josh buys a house for $80,000 and puts in $50,000 in repairs. This increased the value of the house "
    "by 150%. How much profit did he make?",
    "James runs 3 sprints 3 times a week. He runs 60 meters each sprint. How many total meters does he run a week?",
    "Write a Python function that returns the n-th Fibonacci number.",
]
NEAR_TIE = 0.5  # logits; bf16 spacing is 0.125 at |logit| in [16, 32)


def first_divergence(a: list[int], b: list[int]) -> int | None:
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return None


@requires_real_models
def test_real_pair_greedy_agrees_with_ar_except_at_near_ties():
    """bf16 kernels differ between q_len 1 (AR) and q_len > 1 (tree verify): report agreement
    and require that every divergence sits where the target's top-2 logits nearly tie."""
    from seed_tot.models import load_pair

    draft, target = load_pair("default-draft", "default-target")
    config = DecodeConfig(max_new_tokens=32)
    identical, runs, report = 0, 0, []
    for question in REAL_QUESTIONS:
        text = target.tokenizer.apply_chat_template(
            [{"role": "user", "content": question}], add_generation_prompt=True, tokenize=False
        )
        prompt = target.encode(text)
        reference = autoregressive_decode(target, prompt, config).token_ids
        for k_config in [(1, 1, 1, 1), (2, 2, 1)]:
            out = speculative_decode(draft, target, prompt, config, k_config).token_ids
            runs += 1
            at = first_divergence(reference, out)
            if at is None:
                assert out == reference
                identical += 1
                continue
            logits = target.forward(torch.tensor([prompt + reference[:at]]), logits_to_keep=1)[0, -1]
            top2 = logits.topk(2)
            gap = float(top2.values[0] - top2.values[1])
            report.append((k_config, at, gap))
            assert {reference[at], out[at]} == set(top2.indices.tolist()), (k_config, at)
            assert gap < NEAR_TIE, (k_config, at, gap)
    print(f"real pair ({target.dtype}): {identical}/{runs} greedy outputs identical to AR; divergences {report}")
    if target.dtype == torch.float32:
        assert identical == runs
