"""Lookahead decoding equals greedy autoregressive decoding token for token (tiny pair, float32)."""

import pytest
import torch

from seed_tot.config import DecodeConfig
from seed_tot.decoding.lookahead import (
    LookaheadWindow,
    NGramPool,
    build_trie,
    greedy_trie_walk,
    lookahead_decode,
    window_parents,
)
from seed_tot.errors import ConfigError
from seed_tot.runtime import tree_attention_mask, tree_position_ids
from test_jacobi import check_equal_to_reference, prompt_cases, reference_greedy, with_eos

SETTINGS = [(3, 3, 3), (5, 4, 5), (7, 5, 7), (4, 2, 2)]


@pytest.mark.parametrize("window,ngram,candidates", SETTINGS)
def test_lookahead_equals_greedy_on_many_prompts(tiny_pair, window, ngram, candidates):
    check_equal_to_reference(
        lookahead_decode, tiny_pair[1], prompt_cases(32, seed=21), window=window, ngram=ngram, candidates=candidates
    )


@pytest.mark.parametrize("attn", ["sdpa", "eager"])
def test_lookahead_equals_greedy_on_repetitive_text(tiny_pair, tiny_eager_pair, attn):
    """Repetitive prompts fill the pool with n-grams that verify, so multi-token steps happen."""
    target = (tiny_pair if attn == "sdpa" else tiny_eager_pair)[1]
    prompts = [list(b"abcabcabcabcabcabc"), list(b"1 2 3 4 1 2 3 4 1 2 3 4 "), list(b"the cat the cat the cat ")]
    for prompt in prompts:
        config = DecodeConfig(max_new_tokens=64)
        expected, _ = reference_greedy(target, prompt, config)
        out = lookahead_decode(target, prompt, config, window=5, ngram=4, candidates=5)
        assert out.token_ids == expected
        assert out.stats.draft_tokens_accepted > 0
        assert out.stats.target_forwards < 64  # prefill + steps: fewer steps than tokens


@pytest.mark.parametrize("window,ngram,candidates", SETTINGS[:3])
def test_lookahead_stops_at_eos_and_stop_strings_like_greedy(tiny_pair, window, ngram, candidates):
    target = tiny_pair[1]
    params = dict(window=window, ngram=ngram, candidates=candidates)
    for prompt, _ in prompt_cases(6, seed=22):
        free, _ = reference_greedy(target, prompt, DecodeConfig(max_new_tokens=40))
        check_equal_to_reference(lookahead_decode, with_eos(target, free[len(free) // 2]), [(prompt, 40)], **params)
        config = DecodeConfig(max_new_tokens=40, stop=(target.decode(free[10:12]),))
        expected, reason = reference_greedy(target, prompt, config)
        out = lookahead_decode(target, prompt, config, **params)
        assert (out.token_ids, out.finish_reason) == (expected, reason)


def test_window_mask_gives_each_token_its_diagonal_chain(tiny_pair):
    """Logits of every lookahead-window node equal a plain forward over the chain it should see."""
    target = tiny_pair[1]
    prefix, x0, width, levels = list(b"hello world"), 120, 3, 3
    window = [[100 + 10 * level + column for column in range(width)] for level in range(levels)]
    parents = [-1] + window_parents(levels, width)
    ids = [x0] + [t for level in window for t in level]
    cache = target.new_cache()
    target.forward(torch.tensor([prefix]), cache)
    logits = target.forward(
        torch.tensor([ids]),
        cache,
        position_ids=tree_position_ids(parents, len(prefix)),
        attention_mask=tree_attention_mask(parents, len(prefix), target.dtype),
    )[0]
    for level in range(levels):
        for column in range(width):
            seen = [x0] + window[0][: column + 1] + [window[lv][column] for lv in range(1, level + 1)]
            reference = target.forward(torch.tensor([prefix + seen]))[0, -1]
            node = 1 + level * width + column
            assert (logits[node] - reference).abs().max() < 1e-4, (level, column)


def test_pool_is_bounded_and_most_recent_first():
    pool = NGramPool(n=3, max_per_key=2)
    pool.add_sequence([1, 2, 3, 1, 4, 5, 1, 6, 7])
    assert pool.candidates(1, 5) == [(6, 7), (4, 5)]  # (2, 3) was evicted
    pool.add(1, (4, 5))
    assert pool.candidates(1, 1) == [(4, 5)]
    assert pool.candidates(9, 3) == [] and len(pool) == 2 + 4  # keys 2, 3, 4, 5 hold one each


def test_window_collects_ngrams_once_full():
    pool = NGramPool(n=3)
    window = LookaheadWindow(width=2, ngram=3, levels=[[1, 2]])
    window.advance([3, 4], pool)  # warm-up: second level, no n-gram yet
    assert len(pool) == 0 and window.levels == [[1, 2], [3, 4]]
    window.advance([5, 6], pool)
    assert pool.candidates(1, 9) == [(3, 5)] and pool.candidates(2, 9) == [(4, 6)]
    assert window.levels == [[3, 4], [5, 6]]


def test_trie_merges_shared_prefixes_and_walks_greedily():
    tokens, parents = build_trie([(5, 6, 7), (5, 6, 8), (9,)], max_depth=3)
    assert tokens == [5, 6, 7, 8, 9] and parents == [-1, 0, 1, 1, -1]
    # greedy after root is 5, after node0 is 6, after node1 is 8 -> path 0, 1, 3
    assert greedy_trie_walk(tokens, parents, 5, [6, 8, 0, 0, 0]) == [0, 1, 3]
    assert greedy_trie_walk(tokens, parents, 4, [6, 8, 0, 0, 0]) == []
    assert build_trie([(5, 6, 7)], max_depth=1) == ([5], [-1])


def test_lookahead_refuses_sampling_and_bad_settings(tiny_pair):
    with pytest.raises(ConfigError, match="greedy-only"):
        lookahead_decode(tiny_pair[1], [1, 2], DecodeConfig(temperature=1.0))
    with pytest.raises(ConfigError, match="N >= 2"):
        lookahead_decode(tiny_pair[1], [1, 2], DecodeConfig(), ngram=1)
