"""KV of earlier prompts, kept across executor calls and problems, bounded by a byte budget (LRU).

A tree search sends prompts that extend earlier ones: the next depth's value prompts repeat
the question and the steps so far that the previous depth's prompts already held, and every
prompt starts with the same chat-template header. A causal model's KV at position i depends
only on tokens 0..i, so the first m positions of a kept prompt are exactly the KV of any prompt
that starts with the same m tokens. `match` finds the longest such prefix over the kept
prompts (leaving at least one token to compute, whose logits the caller needs); `add` keeps a
prompt's KV and evicts the least recently used prompts beyond the budget.

The kept prompts are indexed by a token trie, so a lookup costs the prompt's length, not the
number of prompts kept (a server that has answered thousands of requests keeps thousands).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from seed_tot.runtime.cache import RowKV

NODE_BYTES = 200  # what one trie node costs in Python objects, counted against the budget


@dataclass
class PrefixMatch:
    length: int  # prompt tokens whose KV is reused (0: none)
    kv: RowKV | None  # per layer (keys, values) of exactly those positions


def kv_bytes(kv: RowKV) -> int:
    return sum(k.numel() * k.element_size() + v.numel() * v.element_size() for k, v in kv)


class _Node:
    __slots__ = ("children", "kept", "key")

    def __init__(self) -> None:
        self.children: dict[int, _Node] = {}
        self.kept = 0  # kept prompts whose tokens pass through this node
        self.key: tuple[int, ...] | None = None  # the kept prompt that ends here


class PrefixCache:
    """Prompts' KV of one model, least recently used evicted first beyond `budget_bytes`."""

    def __init__(self, budget_bytes: int):
        if budget_bytes < 0:
            raise ValueError("the prefix cache budget must be >= 0 bytes")
        self.budget_bytes = budget_bytes
        self.entries: OrderedDict[tuple[int, ...], RowKV] = OrderedDict()
        self.kv_bytes = 0
        self.nodes = 0
        self.root = _Node()
        self.reused_tokens = 0  # prompt tokens prefills started from instead of computing

    @property
    def bytes(self) -> int:
        return self.kv_bytes + self.nodes * NODE_BYTES

    def _deepest(self, tokens) -> tuple[_Node, int]:
        """The deepest node along `tokens` that a kept prompt passes through, and its depth."""
        node, depth = self.root, 0
        for token in tokens:
            child = node.children.get(token)
            if child is None:
                break
            node, depth = child, depth + 1
        return node, depth

    @staticmethod
    def _a_key_through(node: _Node) -> tuple[int, ...]:
        while node.key is None:
            node = next(iter(node.children.values()))
        return node.key

    def match(self, prompt: list[int]) -> PrefixMatch:
        """The longest kept prefix of `prompt`, at most len(prompt) - 1 tokens."""
        node, depth = self._deepest(prompt[: len(prompt) - 1])
        if depth == 0:
            return PrefixMatch(0, None)
        key = self._a_key_through(node)
        self.entries.move_to_end(key)
        kv = [(k[:, :, :depth], v[:, :, :depth]) for k, v in self.entries[key]]
        return PrefixMatch(depth, kv)

    def count_reuse(self, matches: list[PrefixMatch]) -> None:
        """Record that a prefill started from these matches (a match may be looked up and not used)."""
        self.reused_tokens += sum(m.length for m in matches)

    def covers(self, tokens: list[int]) -> bool:
        """Whether a kept prompt starts with `tokens` (so their KV is already kept)."""
        return self._deepest(tokens)[1] == len(tokens)

    def add(self, tokens: list[int], kv: RowKV) -> None:
        """Keep `tokens`' KV (positions 0..len-1), unless a kept prompt already covers it; kept
        prompts that `tokens` extends are dropped (their KV is a slice of the new one's)."""
        key = tuple(tokens)
        if not key or self.covers(tokens):
            return
        size = kv_bytes(kv)
        if size + len(key) * NODE_BYTES > self.budget_bytes:
            return
        self._insert(key)
        self.entries[key] = kv
        self.kv_bytes += size
        while self.bytes > self.budget_bytes:
            self._drop(next(iter(self.entries)))

    def _insert(self, key: tuple[int, ...]) -> None:
        node, extended = self.root, []
        for token in key:
            child = node.children.get(token)
            if child is None:
                child = node.children[token] = _Node()
                self.nodes += 1
            if child.key is not None:
                extended.append(child.key)
            child.kept += 1
            node = child
        node.key = key
        for shorter in extended:  # the new prompt extends them
            self._drop(shorter)

    def _drop(self, key: tuple[int, ...]) -> None:
        self.kv_bytes -= kv_bytes(self.entries.pop(key))
        node = self.root
        for token in key:
            child = node.children[token]
            child.kept -= 1
            if child.kept == 0:  # no other kept prompt below: the rest of the path goes with it
                del node.children[token]
                self.nodes -= self._path_length(child)
                return
            node = child
        node.key = None

    @staticmethod
    def _path_length(node: _Node) -> int:
        """Nodes in a chain that only one kept prompt passed through."""
        count = 1
        while node.children:
            node = next(iter(node.children.values()))
            count += 1
        return count
