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


def tree_attention_mask(parents: list[int], past_len: int, dtype: torch.dtype) -> torch.Tensor:
    """(1, 1, q, past_len + q) additive mask for a token tree appended after `past_len` tokens."""
    return additive_mask(tree_allowed(parents, past_len).unsqueeze(0), dtype)


def tree_position_ids(parents: list[int], past_len: int) -> torch.Tensor:
    """(1, q) positions: a node sits at past_len + its depth."""
    return torch.tensor([[past_len + d for d in tree_depths(parents)]], dtype=torch.long)


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
