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


def test_tree_fed_level_by_level_matches_one_forward(target):
    prefix = tokens(11, 7)
    parents = [-1, -1, 0, 0, 1, 1, 2]  # levels: [0, 1], [2..5], [6]
    tree_tokens = tokens(12, len(parents))
    one = target.new_cache()
    target.forward(torch.tensor([prefix]), one)
    whole = target.forward(
        torch.tensor([tree_tokens]),
        one,
        position_ids=tree_position_ids(parents, len(prefix)),
        attention_mask=tree_attention_mask(parents, len(prefix), target.dtype),
    )[0]
    levels = target.new_cache()
    target.forward(torch.tensor([prefix]), levels)
    parts = []
    for start, stop in [(0, 2), (2, 6), (6, 7)]:
        sub = parents[:stop]
        parts.append(
            target.forward(
                torch.tensor([tree_tokens[start:stop]]),
                levels,
                position_ids=tree_position_ids(sub, len(prefix), start),
                attention_mask=tree_attention_mask(sub, len(prefix), target.dtype, start),
            )[0]
        )
    assert (torch.cat(parts) - whole).abs().max() < TOL
    assert cache_length(levels) == len(prefix) + len(parents)


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


def test_batched_tree_inputs_match_each_tree_alone(target):
    """Several trees over left-padded caches of different lengths in one forward (SEED batched verify)."""
    from seed_tot.runtime.masks import batched_tree_inputs

    prefixes = [tokens(60, 5), tokens(61, 9), tokens(62, 7)]
    trees = [[-1, 0, 0, 1], [-1, 0], [-1, -1, 0, 1, 2]]
    tree_tokens = [tokens(63 + r, len(p)) for r, p in enumerate(trees)]
    caches = []
    for prefix in prefixes:
        c = target.new_cache()
        target.forward(torch.tensor([prefix]), c)
        caches.append(c)
    stacked, pads = stack_left_padded(caches)
    q = max(len(p) for p in trees)
    ids = torch.tensor([t + [0] * (q - len(t)) for t in tree_tokens])
    mask, positions = batched_tree_inputs(trees, [len(p) for p in prefixes], target.dtype)
    logits = target.forward(ids, stacked, position_ids=positions, attention_mask=mask)
    for row, (prefix, parents) in enumerate(zip(prefixes, trees)):
        for node in range(len(parents)):
            path, cur = [], node
            while cur >= 0:
                path.append(tree_tokens[row][cur])
                cur = parents[cur]
            reference = full_logits(target, prefix + path[::-1])[-1]
            assert (logits[row, node] - reference).abs().max() < TOL, (row, node)
    singles = unstack_left_padded(stacked, pads)
    assert [cache_length(c) for c in singles] == [len(p) + q for p in prefixes]


def _chain(n: int, start: int = 0) -> list[int]:
    return [-1] + [start + i for i in range(n - 1)]


def test_gather_positions_picks_per_row_slots(target):
    seqs = [tokens(60, 6), tokens(61, 6)]
    ids = torch.tensor(seqs)
    cache = target.new_cache()
    target.forward(ids, cache)
    from seed_tot.runtime.cache import gather_positions

    index = torch.tensor([[0, 1, 2, 3], [0, 0, 4, 5]])
    gathered = gather_positions(cache, index)
    for layer, original in zip(gathered.layers, cache.layers):
        assert torch.equal(layer.keys[0], original.keys[0, :, :4])
        assert torch.equal(layer.keys[1, :, 2:], original.keys[1, :, 4:6])
        assert torch.equal(layer.values[1, :, 1], original.values[1, :, 0])


def test_ragged_batch_matches_each_sequence_alone(target):
    """Prefill ragged prompts, verify a token tree per row, commit different paths, share rows,
    compact, continue: every logit row equals a full recomputation of that row's sequence."""
    from seed_tot.runtime.ragged import RaggedBatchCache

    prompts = [tokens(70, 5), tokens(71, 9), tokens(72, 2)]
    batch = RaggedBatchCache(target, 3, compact_slack=1000)
    logits = batch.forward(prompts, [_chain(len(p)) for p in prompts])
    for row, prompt in enumerate(prompts):
        assert (logits[row, : len(prompt)] - full_logits(target, prompt)).abs().max() < TOL
    batch.commit([list(range(len(p))) for p in prompts])
    assert batch.lengths == [5, 9, 2]

    # A pad-led row (row 2 feeds nothing) and a 2-token chain in this call.
    first = [[11], [12, 13], []]
    logits = batch.forward(first, [[-1], [-1, 0], []], logits_at=[0, 1, 0])
    assert logits.shape[1] == 1
    assert (logits[1, 0] - full_logits(target, prompts[1] + [12, 13])[-1]).abs().max() < TOL
    base = batch.step_width  # 2
    # tree per row: a <- pending ; b, c <- a (row 2 roots at the committed tokens)
    tree = [[21, 22, 23], [31, 32, 33], [41, 42, 43]]
    parents = [[0, base, base], [1, base, base], [-1, base, base]]
    logits = batch.forward(tree, parents)
    sequences = [prompts[0] + [11], prompts[1] + [12, 13], prompts[2]]
    for row in range(3):
        ref = full_logits(target, sequences[row] + [tree[row][0], tree[row][2]])[-1]
        assert (logits[row, 2] - ref).abs().max() < TOL
    # commit different paths: row 0 keeps 11, 21, 23; row 1 keeps 12, 13; row 2 keeps 41, 42
    batch.commit([[0, base, base + 2], [0, 1], [base, base + 1]])
    sequences = [prompts[0] + [11, 21, 23], prompts[1] + [12, 13], prompts[2] + [41, 42]]
    assert batch.lengths == [len(s) for s in sequences]
    logits = batch.forward([[5], [6], [7]], [[-1], [-1], [-1]])
    for row in range(3):
        ref = full_logits(target, sequences[row] + [5 + row])[-1]
        assert (logits[row, 0] - ref).abs().max() < TOL

    batch = RaggedBatchCache(target, 3, compact_slack=1000)
    batch.forward(prompts, [_chain(len(p)) for p in prompts])
    batch.commit([list(range(len(p))) for p in prompts])
    batch.forward([[11], [12, 13], []], [[-1], [-1, 0], []])
    batch.commit([[0], [0, 1], []])
    batch.select([2, 0, 0])  # repeat row 0 twice, drop row 1
    sequences = [prompts[2], prompts[0] + [11], prompts[0] + [11]]
    batch.compact()
    assert batch.width == max(len(s) for s in sequences)
    step = [[7], [8], [9]]
    logits = batch.forward(step, [[-1], [-1], [-1]])
    for row in range(3):
        ref = full_logits(target, sequences[row] + step[row])[-1]
        assert (logits[row, 0] - ref).abs().max() < TOL


def test_ragged_commit_rejects_non_chain(target):
    from seed_tot.runtime.ragged import RaggedBatchCache

    batch = RaggedBatchCache(target, 1)
    batch.forward([[1, 2, 3]], [[-1, 0, 0]])
    with pytest.raises(ValueError):
        batch.commit([[1, 2]])  # siblings, not a chain


def test_spare_capacity_layer_appends_in_place_and_never_writes_adopted_tensors():
    from seed_tot.runtime.cache import SpareCapacityLayer

    layer = SpareCapacityLayer()
    first = torch.randn(2, 3, 5, 4)
    keys, _ = layer.update(first, first + 1)
    assert keys is first  # the first tensor is adopted, not copied
    appended = [torch.randn(2, 3, 1, 4) for _ in range(4)]
    keys, values = layer.update(appended[0], appended[0] + 1)
    buffer = keys.data_ptr()
    for step in appended[1:]:
        keys, values = layer.update(step, step + 1)
    assert keys.data_ptr() == buffer  # later appends wrote into the same buffer
    expected = torch.cat([first, *appended], dim=-2)
    assert torch.equal(keys, expected) and torch.equal(values, expected + 1)
    shared = keys.clone()
    layer.keys, layer.values = shared, shared  # e.g. rows selected into a new tensor
    layer.update(appended[0], appended[0])
    assert torch.equal(shared, expected)  # a tensor it did not allocate is never written
    assert torch.equal(layer.keys, torch.cat([expected, appended[0]], dim=-2))
