"""Attention masks and position ids for token trees, windows and padded batches.

Masks are ADDITIVE float tensors (0 = may attend, dtype-min = blocked). A boolean 4-D mask
gives correct logits with sdpa but silently wrong ones with eager attention in
transformers 5.23, so booleans never reach the model.
"""

from __future__ import annotations

import torch


def additive_mask(allowed: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """(B, q, kv) bool -> (B, 1, q, kv) additive float mask in `dtype`."""
    blocked = torch.finfo(dtype).min
    mask = torch.zeros(allowed.shape, dtype=dtype)
    mask.masked_fill_(~allowed, blocked)
    return mask.unsqueeze(1)


def tree_depths(parents: list[int]) -> list[int]:
    """Depth of each node (root nodes have parent -1 and depth 0); parents precede children."""
    depths: list[int] = []
    for i, parent in enumerate(parents):
        if parent >= i:
            raise ValueError("tree nodes must be listed after their parents")
        depths.append(0 if parent < 0 else depths[parent] + 1)
    return depths


def tree_allowed(parents: list[int], past_len: int) -> torch.Tensor:
    """(q, past_len + q) bool: node i sees the whole past, its ancestors and itself."""
    q = len(parents)
    allowed = torch.zeros(q, past_len + q, dtype=torch.bool)
    allowed[:, :past_len] = True
    for i, parent in enumerate(parents):
        allowed[i, past_len + i] = True
        if parent >= 0:
            allowed[i, past_len : past_len + q] |= allowed[parent, past_len : past_len + q]
    return allowed


def tree_attention_mask(parents: list[int], past_len: int, dtype: torch.dtype, start: int = 0) -> torch.Tensor:
    """(1, 1, q - start, past_len + q) additive mask for a token tree appended after `past_len` tokens.

    With `start` > 0, nodes [0, start) are already in the cache right after the past (a tree
    fed level by level): the mask covers only the new nodes [start, q).
    """
    return additive_mask(tree_allowed(parents, past_len)[start:].unsqueeze(0), dtype)


def tree_position_ids(parents: list[int], past_len: int, start: int = 0) -> torch.Tensor:
    """(1, q - start) positions of nodes [start, q): a node sits at past_len + its depth."""
    return torch.tensor([[past_len + d for d in tree_depths(parents)[start:]]], dtype=torch.long)


def left_pad(sequences: list[list[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Left-pad token lists: returns input_ids, 2-D attention mask and position ids (B, L)."""
    longest = max(len(s) for s in sequences)
    ids = torch.full((len(sequences), longest), pad_id, dtype=torch.long)
    mask = torch.zeros((len(sequences), longest), dtype=torch.long)
    for row, seq in enumerate(sequences):
        if seq:
            ids[row, longest - len(seq) :] = torch.tensor(seq, dtype=torch.long)
            mask[row, longest - len(seq) :] = 1
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    return ids, mask, positions


def batched_tree_inputs(
    parents_per_row: list[list[int]], past_lengths: list[int], dtype: torch.dtype
) -> tuple[torch.Tensor, torch.Tensor]:
    """Mask and positions for one forward over several token trees, one per batch row.

    Row r's cache holds past_lengths[r] real positions, left-padded to the longest (as
    seed_tot.runtime.cache.stack_left_padded builds it); its tree is right-padded to the
    largest tree. Pad columns are blocked; a pad query only sees itself (its output is
    garbage and must be ignored; its cache entry must be dropped by the caller).
    Returns the additive mask (B, 1, q, past + q) and position ids (B, q).
    """
    rows, q = len(parents_per_row), max(len(p) for p in parents_per_row)
    past = max(past_lengths)
    allowed = torch.zeros(rows, q, past + q, dtype=torch.bool)
    positions = torch.zeros(rows, q, dtype=torch.long)
    for r, (parents, length) in enumerate(zip(parents_per_row, past_lengths)):
        n = len(parents)
        tree = tree_allowed(parents, 0)
        allowed[r, :n, past - length : past] = True
        allowed[r, :n, past : past + n] = tree
        positions[r, :n] = torch.tensor([length + d for d in tree_depths(parents)], dtype=torch.long)
        for i in range(n, q):
            allowed[r, i, past + i] = True
            positions[r, i] = length
    return additive_mask(allowed, dtype), positions


def prefixed_tree_mask(
    parents: list[int], past_len: int, prefix_len: int, sees_prefix: list[bool], dtype: torch.dtype
) -> torch.Tensor:
    """(1, 1, q, prefix_len + past_len + q) additive mask for a token tree appended to a prefixed
    cache ([prefix][past]): node i sees the past, its ancestors and itself, and the prefix only
    where sees_prefix[i]. Positions are tree_position_ids(parents, past_len): the prefix has none."""
    tree = tree_allowed(parents, past_len)
    prefix = torch.tensor(sees_prefix, dtype=torch.bool).unsqueeze(1).expand(-1, prefix_len)
    return additive_mask(torch.cat([prefix, tree], dim=1).unsqueeze(0), dtype)


def anchored_chains_mask(
    anchors: list[int], chain_len: int, past_len: int, prefix_len: int, dtype: torch.dtype
) -> tuple[torch.Tensor, torch.Tensor]:
    """Mask and positions for chains of `chain_len` tokens, chain g hanging under the cached token
    at sequence index anchors[g] of a prefixed cache ([prefix][past]): its tokens see the prefix,
    the past up to and including that anchor, and the chain before them (not other chains).
    Returns the additive mask (1, 1, G*chain_len, prefix_len + past_len + G*chain_len) and the
    position ids (1, G*chain_len): anchor + 1 + offset in the chain."""
    q = len(anchors) * chain_len
    allowed = torch.zeros(q, prefix_len + past_len + q, dtype=torch.bool)
    allowed[:, :prefix_len] = True
    positions = torch.zeros(q, dtype=torch.long)
    causal = torch.tril(torch.ones(chain_len, chain_len, dtype=torch.bool))
    for g, anchor in enumerate(anchors):
        if not 0 <= anchor < past_len:
            raise ValueError(f"anchor {anchor} is outside the {past_len} cached positions")
        rows = slice(g * chain_len, (g + 1) * chain_len)
        allowed[rows, prefix_len : prefix_len + anchor + 1] = True
        start = prefix_len + past_len + g * chain_len
        allowed[rows, start : start + chain_len] = causal
        positions[rows] = torch.arange(anchor + 1, anchor + 1 + chain_len)
    return additive_mask(allowed.unsqueeze(0), dtype), positions.unsqueeze(0)
