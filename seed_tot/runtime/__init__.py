"""The only package that touches transformers' forward signature, caches, 4-D masks and positions."""

from seed_tot.runtime.subnormals import flush_subnormals

flush_subnormals()  # before torch starts its worker threads: they inherit the mode (subnormals.py)

from seed_tot.runtime.cache import (
    KVCache,
    cache_length,
    fork_cache,
    keep_positions,
    rollback,
)
from seed_tot.runtime.masks import (
    additive_mask,
    left_pad,
    tree_attention_mask,
    tree_position_ids,
)
from seed_tot.runtime.packed_linear import pack_linear_layers
from seed_tot.runtime.runner import ModelRunner

__all__ = [
    "KVCache",
    "ModelRunner",
    "additive_mask",
    "cache_length",
    "fork_cache",
    "keep_positions",
    "left_pad",
    "pack_linear_layers",
    "rollback",
    "tree_attention_mask",
    "tree_position_ids",
]
