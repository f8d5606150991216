"""KV of earlier prompts, kept across executor calls and problems, bounded by a byte budget (LRU).

A tree search sends prompts that extend earlier ones: the next depth's value prompts repeat
the question and the steps so far that the previous depth's prompts already held, and every
prompt starts with the same chat-template header. A causal model's KV at position i depends
only on tokens 0..i, so the first m positions of a kept prompt are exactly the KV of any prompt
that starts with the same m tokens. `match` finds the longest such prefix over the kept
prompts (leaving at least one token to compute, whose logits the caller needs); `add` keeps a
prompt's KV and evicts the least recently used prompts beyond the budget.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from seed_tot.decoding.drafters import common_prefix_length
from seed_tot.runtime.cache import RowKV


@dataclass
class PrefixMatch:
    length: int  # prompt tokens whose KV is reused (0: none)
    kv: RowKV | None  # per layer (keys, values) of exactly those positions


def kv_bytes(kv: RowKV) -> int:
    return sum(k.numel() * k.element_size() + v.numel() * v.element_size() for k, v in kv)


class PrefixCache:
    """Prompts' KV of one model, least recently used evicted first beyond `budget_bytes`."""

    def __init__(self, budget_bytes: int):
        if budget_bytes < 0:
            raise ValueError("the prefix cache budget must be >= 0 bytes")
        self.budget_bytes = budget_bytes
        self.entries: OrderedDict[tuple[int, ...], RowKV] = OrderedDict()
        self.bytes = 0
        self.reused_tokens = 0  # prompt tokens prefills started from instead of computing

    def match(self, prompt: list[int]) -> PrefixMatch:
        """The longest kept prefix of `prompt`, at most len(prompt) - 1 tokens."""
        best_key, best_length = None, 0
        for key in self.entries:
            length = min(common_prefix_length(key, prompt), len(prompt) - 1)
            if length > best_length:
                best_key, best_length = key, length
        if best_key is None:
            return PrefixMatch(0, None)
        self.entries.move_to_end(best_key)
        kv = [(k[:, :, :best_length], v[:, :, :best_length]) for k, v in self.entries[best_key]]
        return PrefixMatch(best_length, kv)

    def count_reuse(self, matches: list[PrefixMatch]) -> None:
        """Record that a prefill started from these matches (a match may be looked up and not used)."""
        self.reused_tokens += sum(m.length for m in matches)

    def covers(self, tokens: list[int]) -> bool:
        """Whether a kept prompt starts with `tokens` (so their KV is already kept)."""
        key = tuple(tokens)
        return any(k[: len(key)] == key for k in self.entries)

    def add(self, tokens: list[int], kv: RowKV) -> None:
        """Keep `tokens`' KV (positions 0..len-1), unless a kept prompt already covers it."""
        key = tuple(tokens)
        if not key or self.covers(tokens):
            return
        size = kv_bytes(kv)
        if size > self.budget_bytes:
            return
        for covered in [k for k in self.entries if key[: len(k)] == k]:  # the new prompt extends them
            self.bytes -= kv_bytes(self.entries.pop(covered))
        self.entries[key] = kv
        self.bytes += size
        while self.bytes > self.budget_bytes:
            _, evicted = self.entries.popitem(last=False)
            self.bytes -= kv_bytes(evicted)
