"""KV-cache operations over transformers' DynamicCache (5.x API).

transformers 5.x changed `DynamicCache.crop(n)`: only negative n is accepted (drop the last
|n| tokens). Everything that depends on cache internals (`layers[i].keys/values`) lives here
and is pinned by tests/test_runtime.py.
"""

from __future__ import annotations

import torch
from transformers import DynamicCache
from transformers.cache_utils import DynamicLayer

# The cache type decoders hold; only runtime/ names transformers' class.
KVCache = DynamicCache


class SpareCapacityLayer(DynamicLayer):
    """A DynamicLayer that appends into spare capacity instead of concatenating the whole layer
    anew on every forward (DynamicLayer's torch.cat copies every position each step; measured:
    docs/executors.md#the-batched-executors-seed_totschedulingbatchedpy).

    Writes go in place only into a buffer this layer allocated, after the view it last returned;
    any other tensor put in `keys` (crop, select, gather) is adopted as is and copied into a new
    buffer on the next append, so tensors shared with other caches are never written.
    """

    _buffers: tuple[torch.Tensor, torch.Tensor] | None = None
    _view: torch.Tensor | None = None

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs):
        if not self.is_initialized or self.keys is None or self.keys.numel() == 0:
            self.dtype, self.device = key_states.dtype, key_states.device
            self.keys, self.values, self.is_initialized = key_states, value_states, True
            return self.keys, self.values
        held, needed = self.keys.shape[-2], self.keys.shape[-2] + key_states.shape[-2]
        if self._buffers is None or self.keys is not self._view or self._buffers[0].shape[-2] < needed:
            capacity = needed + max(64, needed // 4)
            keys = self.keys.new_empty((*self.keys.shape[:2], capacity, self.keys.shape[-1]))
            values = self.values.new_empty((*self.values.shape[:2], capacity, self.values.shape[-1]))
            keys[:, :, :held] = self.keys
            values[:, :, :held] = self.values
            self._buffers = (keys, values)
        keys, values = self._buffers
        keys[:, :, held:needed] = key_states
        values[:, :, held:needed] = value_states
        self.keys, self.values = keys[:, :, :needed], values[:, :, :needed]
        self._view = self.keys
        return self.keys, self.values


def empty_cache() -> DynamicCache:
    """A DynamicCache whose layers append into spare capacity (SpareCapacityLayer)."""
    cache = DynamicCache()
    cache.layer_class_to_replicate = SpareCapacityLayer
    return cache


def cache_length(cache: DynamicCache) -> int:
    """Number of token positions held in the cache, read from the tensors
    (transformers' get_seq_length() says 0 for a batch of no rows)."""
    layers = [layer for layer in cache.layers if layer.is_initialized]
    return int(layers[0].keys.shape[-2]) if layers else 0


def rollback(cache: DynamicCache, length: int) -> None:
    """Drop every position at or after `length` (in place)."""
    current = cache_length(cache)
    if length > current or length < 0:
        raise ValueError(f"cannot roll a cache of length {current} back to {length}")
    if length < current:
        cache.crop(length - current)


def keep_positions(cache: DynamicCache, start: int, keep: list[int]) -> None:
    """Keep positions [0, start) plus the positions `keep` (absolute, increasing), in place.

    Used after token-tree verification: the accepted path's KV entries are scattered among
    the tree's nodes and must become contiguous.
    """
    index = torch.tensor(list(range(start)) + list(keep), dtype=torch.long)
    for layer in cache.layers:
        if not layer.is_initialized:
            continue
        idx = index.to(layer.keys.device)
        layer.keys = layer.keys.index_select(-2, idx)
        layer.values = layer.values.index_select(-2, idx)


def fork_cache(cache: DynamicCache) -> DynamicCache:
    """An independent cache that starts with the same positions, without copying them.

    DynamicCache appends with torch.cat and crops by slicing, so the shared prefix tensors
    are never written in place: sharing them between forks is safe and free.
    """
    forked = empty_cache()
    for layer_idx, layer in enumerate(cache.layers):
        if layer.is_initialized:
            forked.update(layer.keys, layer.values, layer_idx)
    return forked


def select_rows(cache: DynamicCache, rows: list[int]) -> DynamicCache:
    """A new cache holding only the given batch rows (no in-place change of `cache`)."""
    index = torch.tensor(rows, dtype=torch.long)
    selected = empty_cache()
    for layer_idx, layer in enumerate(cache.layers):
        if layer.is_initialized:
            idx = index.to(layer.keys.device)
            selected.update(layer.keys.index_select(0, idx), layer.values.index_select(0, idx), layer_idx)
    return selected


def row_prefix(cache: DynamicCache, row: int, length: int) -> DynamicCache:
    """A new one-row cache holding the first `length` positions of batch row `row` (copied)."""
    kept = empty_cache()
    for layer_idx, layer in enumerate(cache.layers):
        if layer.is_initialized:
            kept.update(layer.keys[row : row + 1, :, :length].clone(), layer.values[row : row + 1, :, :length].clone(),
                        layer_idx)
    return kept


def repeat_rows(cache: DynamicCache, times: int) -> DynamicCache:
    """A new cache whose batch holds `times` copies of a batch-1 cache (prompt-prefix sharing)."""
    repeated = empty_cache()
    for layer_idx, layer in enumerate(cache.layers):
        if layer.is_initialized:
            repeated.update(
                layer.keys.expand(times, -1, -1, -1).contiguous(),
                layer.values.expand(times, -1, -1, -1).contiguous(),
                layer_idx,
            )
    return repeated


# One row's KV outside a cache: per layer (keys, values), each (1, heads, positions, dim).
RowKV = list[tuple[torch.Tensor, torch.Tensor]]


def stack_left_padded(caches: list[DynamicCache]) -> tuple[DynamicCache, list[int]]:
    """Stack batch-1 caches of different lengths into one batch, left-padded with zeros.

    Returns the batched cache and each row's pad length; the caller must mask the pads.
    """
    return stack_rows([[(layer.keys, layer.values) for layer in cache.layers] for cache in caches])


def stack_rows(rows: list[RowKV]) -> tuple[DynamicCache, list[int]]:
    """Stack rows of KV of different lengths (zero allowed) into one cache, left-padded with zeros.

    Returns the batched cache and each row's pad length; the caller must mask the pads.
    """
    lengths = [row[0][0].shape[-2] for row in rows]
    longest = max(lengths)
    pads = [longest - n for n in lengths]
    stacked = empty_cache()
    for layer_idx in range(len(rows[0])):
        keys, values = [], []
        for row, pad in zip(rows, pads):
            k, v = row[layer_idx]
            if pad:
                k = torch.nn.functional.pad(k, (0, 0, pad, 0))
                v = torch.nn.functional.pad(v, (0, 0, pad, 0))
            keys.append(k)
            values.append(v)
        stacked.update(torch.cat(keys, 0), torch.cat(values, 0), layer_idx)
    return stacked, pads


def concat_left_padded(
    first: DynamicCache, first_rows: int, second: DynamicCache, second_rows: int
) -> tuple[DynamicCache, int, int]:
    """One cache holding the rows of `first` then those of `second`, the shorter one left-padded
    with zeros to the other's length (a cache without positions counts as zero-length rows).
    Returns the cache and the pad of each part; the caller masks the pads."""
    width_first, width_second = cache_length(first), cache_length(second)
    width = max(width_first, width_second)
    if width == 0:
        return empty_cache(), 0, 0
    template = first if width_first else second

    def part(cache: DynamicCache, rows: int, layer_idx: int) -> tuple[torch.Tensor, torch.Tensor]:
        if not cache_length(cache):
            k = template.layers[layer_idx].keys
            zeros = k.new_zeros(rows, k.shape[1], width, k.shape[3])
            return zeros, zeros
        layer = cache.layers[layer_idx]
        pad = width - layer.keys.shape[-2]
        return (torch.nn.functional.pad(layer.keys, (0, 0, pad, 0)),
                torch.nn.functional.pad(layer.values, (0, 0, pad, 0)))

    joined = empty_cache()
    for layer_idx in range(len(template.layers)):
        (k1, v1), (k2, v2) = part(first, first_rows, layer_idx), part(second, second_rows, layer_idx)
        joined.update(torch.cat([k1, k2], 0), torch.cat([v1, v2], 0), layer_idx)
    return joined, width - width_first, width - width_second


def row_positions(cache: DynamicCache, row: int, positions: torch.Tensor) -> RowKV:
    """A copy of one batch row's KV at the given positions (in that order)."""
    out = []
    for layer in cache.layers:
        idx = positions.to(layer.keys.device)
        out.append((layer.keys[row : row + 1].index_select(2, idx), layer.values[row : row + 1].index_select(2, idx)))
    return out


def unstack_left_padded(cache: DynamicCache, pads: list[int]) -> list[DynamicCache]:
    """Split a left-padded batched cache back into batch-1 caches without their pads."""
    out = []
    for row, pad in enumerate(pads):
        single = empty_cache()
        for layer_idx, layer in enumerate(cache.layers):
            single.update(layer.keys[row : row + 1, :, pad:], layer.values[row : row + 1, :, pad:], layer_idx)
        out.append(single)
    return out


def gather_positions(cache: DynamicCache, index: torch.Tensor) -> DynamicCache:
    """A new cache whose row b holds the positions index[b] (B, W') of `cache`, in that order.

    Used to compact a ragged batch: each row keeps only its valid positions, left-padded
    (pad slots may point at any position; the caller masks them).
    """
    gathered = empty_cache()
    for layer_idx, layer in enumerate(cache.layers):
        if layer.is_initialized:
            b, heads, _, dim = layer.keys.shape
            idx = index.to(layer.keys.device)[:, None, :, None].expand(b, heads, -1, dim)
            gathered.update(layer.keys.gather(2, idx), layer.values.gather(2, idx), layer_idx)
    return gathered
