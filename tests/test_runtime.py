"""Every runtime operation against a full recomputation without cache (float32, < 1e-4)."""

import pytest
import torch

from seed_tot.runtime import (
    ModelRunner,
    cache_length,
    fork_cache,
    keep_positions,
    left_pad,
    rollback,
    tree_attention_mask,
    tree_position_ids,
)
from seed_tot.runtime.cache import repeat_rows, stack_left_padded, unstack_left_padded
from seed_tot.runtime.masks import tree_depths

TOL = 1e-4


def full_logits(runner: ModelRunner, ids: list[int]) -> torch.Tensor:
    return runner.forward(torch.tensor([ids]), cache=None)[0]


def tokens(seed: int, n: int) -> list[int]:
    return torch.randint(0, 256, (n,), generator=torch.Generator().manual_seed(seed)).tolist()


@pytest.fixture(params=["sdpa", "eager"])
def target(request, tiny_pair, tiny_eager_pair):
    return (tiny_pair if request.param == "sdpa" else tiny_eager_pair)[1]


def test_incremental_forward_matches_full(target):
    ids = tokens(1, 20)
    cache = target.new_cache()
    parts = [target.forward(torch.tensor([ids[:12]]), cache)[0]]
    for t in ids[12:16]:
        parts.append(target.forward(torch.tensor([[t]]), cache)[0])
    parts.append(target.forward(torch.tensor([ids[16:]]), cache)[0])
    assert cache_length(cache) == 20
    assert (torch.cat(parts) - full_logits(target, ids)).abs().max() < TOL


def test_rollback_then_continue_matches_full(target):
    ids, other = tokens(2, 15), tokens(3, 5)
    cache = target.new_cache()
    target.forward(torch.tensor([ids]), cache)
    rollback(cache, 10)
    assert cache_length(cache) == 10
    logits = target.forward(torch.tensor([other]), cache)[0]
    assert (logits - full_logits(target, ids[:10] + other)[10:]).abs().max() < TOL


def test_rollback_rejects_growth(target):
    cache = target.new_cache()
    target.forward(torch.tensor([tokens(4, 5)]), cache)
    with pytest.raises(ValueError):
        rollback(cache, 6)


def test_tree_forward_matches_each_branch(target):
    prefix = tokens(5, 9)
    # tree: 0 -> (1, 2); 1 -> 3; 2 -> 4 ; plus a second root 5
    parents = [-1, 0, 0, 1, 2, -1]
    tree_tokens = tokens(6, len(parents))
    cache = target.new_cache()
    target.forward(torch.tensor([prefix]), cache)
    mask = tree_attention_mask(parents, len(prefix), target.dtype)
    pos = tree_position_ids(parents, len(prefix))
    logits = target.forward(torch.tensor([tree_tokens]), cache, position_ids=pos, attention_mask=mask)[0]
    for node in range(len(parents)):
        path, cur = [], node
        while cur >= 0:
            path.append(tree_tokens[cur])
            cur = parents[cur]
        reference = full_logits(target, prefix + path[::-1])[-1]
        assert (logits[node] - reference).abs().max() < TOL, node


def test_keep_positions_after_tree_matches_full(target):
    prefix = tokens(7, 8)
    parents = [-1, 0, 0, 1, 2]  # accepted path: nodes 0 -> 2 -> 4
    tree_tokens = tokens(8, len(parents))
    cache = target.new_cache()
    target.forward(torch.tensor([prefix]), cache)
    target.forward(
        torch.tensor([tree_tokens]),
        cache,
        position_ids=tree_position_ids(parents, len(prefix)),
        attention_mask=tree_attention_mask(parents, len(prefix), target.dtype),
    )
    keep_positions(cache, len(prefix), [len(prefix) + i for i in (0, 2, 4)])
    assert cache_length(cache) == len(prefix) + 3
    path = [tree_tokens[i] for i in (0, 2, 4)]
    nxt = tokens(9, 3)
    logits = target.forward(torch.tensor([nxt]), cache)[0]
    assert (logits - full_logits(target, prefix + path + nxt)[-3:]).abs().max() < TOL


def test_tree_depths_rejects_bad_order():
    assert tree_depths([-1, 0, 1, 0]) == [0, 1, 2, 1]
    with pytest.raises(ValueError):
        tree_depths([1, -1])


def test_fork_shares_prefix_and_diverges(target):
    prefix = tokens(10, 11)
    cache = target.new_cache()
    target.forward(torch.tensor([prefix]), cache)
    forks = [fork_cache(cache) for _ in range(3)]
    for i, fork in enumerate(forks):
        cont = tokens(20 + i, 4)
        logits = target.forward(torch.tensor([cont]), fork)[0]
        assert (logits - full_logits(target, prefix + cont)[-4:]).abs().max() < TOL
    assert cache_length(cache) == len(prefix)


def test_batched_left_padded_forward_matches_each(target):
    seqs = [tokens(30, 5), tokens(31, 9), tokens(32, 7)]
    ids, mask, pos = left_pad(seqs, target.pad_token_id)
    cache = target.new_cache()
    logits = target.forward(ids, cache, position_ids=pos, attention_mask=mask)
    for row, seq in enumerate(seqs):
        ref = full_logits(target, seq)
        assert (logits[row, -len(seq) :] - ref).abs().max() < TOL
    # one more decode step in the padded batch
    step = torch.tensor([[5], [6], [7]])
    mask2 = torch.cat([mask, torch.ones(3, 1, dtype=mask.dtype)], 1)
    pos2 = pos[:, -1:] + 1
    logits2 = target.forward(step, cache, position_ids=pos2, attention_mask=mask2)
    for row, seq in enumerate(seqs):
        ref = full_logits(target, seq + [5 + row])[-1]
        assert (logits2[row, -1] - ref).abs().max() < TOL


def test_repeat_rows_shares_prompt_across_batch(target):
    prompt = tokens(40, 10)
    cache = target.new_cache()
    target.forward(torch.tensor([prompt]), cache)
    batch = repeat_rows(cache, 3)
    step = torch.tensor([[1], [2], [3]])
    logits = target.forward(step, batch)
    for row in range(3):
        assert (logits[row, -1] - full_logits(target, prompt + [row + 1])[-1]).abs().max() < TOL


def test_stack_and_unstack_caches_with_padding(target):
    seqs = [tokens(50, 6), tokens(51, 10)]
    caches = []
    for seq in seqs:
        c = target.new_cache()
        target.forward(torch.tensor([seq]), c)
        caches.append(c)
    stacked, pads = stack_left_padded(caches)
    assert pads == [4, 0]
    width = 10 + 2
    allowed = torch.ones(2, 2, width, dtype=torch.bool)
    allowed[0, :, :4] = False
    allowed[:, 0, -1] = False  # causal inside the 2 new tokens
    from seed_tot.runtime import additive_mask

    new = torch.tensor([[1, 2], [3, 4]])
    positions = torch.tensor([[6, 7], [10, 11]])
    logits = target.forward(new, stacked, position_ids=positions, attention_mask=additive_mask(allowed, target.dtype))
    for row, seq in enumerate(seqs):
        ref = full_logits(target, seq + new[row].tolist())[-2:]
        assert (logits[row] - ref).abs().max() < TOL
    singles = unstack_left_padded(stacked, pads)
    assert [cache_length(c) for c in singles] == [8, 12]
    nxt = target.forward(torch.tensor([[9]]), singles[0])[0, -1]
    assert (nxt - full_logits(target, seqs[0] + [1, 2, 9])[-1]).abs().max() < TOL
