"""What a judge keeps between its calls in a search: each prompt's KV, and the KV of the states it
read last time for that prompt.

A search asks the judge about a state's children right after it rated the state itself, so the
longest part of every new reading (the prompt and the parent state) was read one call before.
Keeping that call's KV lets the next one start where the parent ends. Memory: per prompt, the
KV of the last call's readings up to the judge's deepest layer (about 28 KiB per token for the
default target's layer 14 in float32, so ~12 MiB for a 450-token reading); at most `prompts`
prompts are kept, the least recently used dropped first.
"""

from __future__ import annotations

from collections import OrderedDict

from seed_tot.runtime.cache import KVCache, row_prefix


def common_length(a: list[int] | tuple[int, ...], b: list[int] | tuple[int, ...]) -> int:
    """The length of the longest common prefix of two token lists."""
    limit = min(len(a), len(b))
    return next((k for k in range(limit) if a[k] != b[k]), limit)


class ReadingMemory:
    def __init__(self, prompts: int = 32) -> None:
        self.prompts = prompts
        self._prompt: OrderedDict[str, tuple[list[int], KVCache]] = OrderedDict()
        self._readings: dict[str, list[tuple[tuple[int, ...], KVCache]]] = {}

    def prompt(self, message: str) -> tuple[list[int], KVCache] | None:
        """(prompt ids, one-row KV) kept for `message`, or None."""
        if message not in self._prompt:
            return None
        self._prompt.move_to_end(message)
        return self._prompt[message]

    def keep_prompt(self, message: str, prompt_ids: list[int], cache: KVCache) -> None:
        self._prompt[message] = (prompt_ids, cache)
        self._prompt.move_to_end(message)
        while len(self._prompt) > self.prompts:
            dropped, _ = self._prompt.popitem(last=False)
            self._readings.pop(dropped, None)

    def longest(self, message: str, tokens: list[int], prompt_length: int) -> tuple[int, KVCache | None]:
        """(k, one-row KV of the prompt and tokens[:k]) for the kept reading of `message` that shares
        the longest prefix with `tokens`; (0, None) when none shares any."""
        best, found = 0, None
        for kept_tokens, cache in self._readings.get(message, []):
            length = common_length(kept_tokens, tokens)
            if length > best:
                best, found = length, cache
        return (best, row_prefix(found, 0, prompt_length + best)) if found is not None else (0, None)

    def keep_readings(self, message: str, readings: list[tuple[tuple[int, ...], KVCache]]) -> None:
        """The readings of this call for `message` (reply tokens, one-row KV of prompt + reply),
        replacing the previous call's."""
        if message in self._prompt:
            self._readings[message] = readings
