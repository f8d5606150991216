"""The features a learned judge reads: the target's hidden state at the last token of a state, or
at its answer's last token when the state gives its answer.

Rule: the task's chain-of-thought prompt is the user message, the state text is the beginning of
the model's reply, and the feature is the residual stream after decoder layer L at the state's
last token (for a state that gives its answer: at the answer's last occurrence, see
seed_tot/values/states.py). Because attention is causal, one forward over a whole chain gives the features of
every state of it (each line end) at once, and the forward stops at layer L
(seed_tot/runtime/hidden.py). No token is decoded.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from seed_tot.reasoning.prompting import PromptFormatter
from seed_tot.runtime.cache import row_prefix
from seed_tot.runtime.hidden import layer_states, prompt_cache, shared_prefix
from seed_tot.runtime.runner import ModelRunner
from seed_tot.values.reading_memory import ReadingMemory, common_length
from seed_tot.values.states import last_token_before

FEATURE_RULE = ("cot-prompt + state as the reply; residual stream after decoder layer L at the state's last token, "
                "or at the answer's last token for a state that gives its answer")


@dataclass(frozen=True)
class Reading:
    """What to read: the user message, the reply text, and where in it each state ends (characters)."""

    message: str
    text: str
    ends: tuple[int, ...]


class FeatureReader:
    """Reads (states, layers, hidden) float32 features of readings with one loaded target.

    Readings that share a message share its prompt: the prompt runs once (up to the deepest layer)
    and its cache is repeated for the batch of replies that continue it. Readings that also differ
    only in their last line (a state's children) read the tokens before it once, the same way."""

    def __init__(self, target: ModelRunner, layers: tuple[int, ...], max_batch_tokens: int = 4096,
                 memory: ReadingMemory | None = None) -> None:
        """`memory`: KV kept between calls (a search's judge: seed_tot/values/reading_memory.py)."""
        self.target = target
        self.formatter = PromptFormatter(target.tokenizer)
        self.layers = tuple(sorted(set(layers)))
        self.max_batch_tokens = max_batch_tokens
        self.memory = memory
        self.tokens_read = 0  # token positions run through the layers (cost accounting)

    def read(self, readings: list[Reading]) -> list[torch.Tensor]:
        """One (len(ends), len(layers), hidden) tensor per reading, in order."""
        out: list[torch.Tensor | None] = [None] * len(readings)
        groups: dict[str, list[int]] = {}
        for i, reading in enumerate(readings):
            groups.setdefault(reading.message, []).append(i)
        for message, members in groups.items():
            prompt, cache = self._prompt(message)
            encoded = {i: self._encode(readings[i]) for i in members}
            kept: list = []
            for family in families(members, [readings[i].text for i in members]):
                tokens = encoded[family[0]][0]
                shared = shared_tokens([encoded[i] for i in family])
                reusable = shared if len(family) > 1 else first_reading_point(encoded[family[0]])
                start, base = self._kept_start(message, tokens[:reusable], len(prompt))
                base = base if base is not None else cache
                if shared > start:
                    base, start = self._extended(base, tokens[start:shared]), shared
                rest = {i: (encoded[i][0][start:], [end - start for end in encoded[i][1]]) for i in family}
                for i, row_cache in self._read_family(family, rest, len(prompt) + start, base, out):
                    kept.append((tuple(encoded[i][0]), row_cache))
            if self.memory is not None:
                self.memory.keep_readings(message, kept)
        return out

    def _prompt(self, message: str):
        """(prompt ids, its one-row KV up to the deepest layer read), from memory when kept."""
        known = self.memory.prompt(message) if self.memory is not None else None
        if known is not None:
            return known
        prompt = self.formatter.encode_text(self.formatter.reply_prefix(message))
        cache = prompt_cache(self.target.model, prompt, max(self.layers))
        self.tokens_read += len(prompt)
        if self.memory is not None:
            self.memory.keep_prompt(message, prompt, cache)
        return prompt, cache

    def _kept_start(self, message: str, tokens: list[int], prompt_length: int):
        """(k, KV of the prompt and tokens[:k]) from the reading kept in memory that shares the most of
        `tokens`; (0, None) without memory or such a reading."""
        if self.memory is None or not tokens:
            return 0, None
        return self.memory.longest(message, tokens, prompt_length)

    def _read_family(self, family: list[int], encoded, context: int, cache, out) -> list:
        """Read the family's remaining tokens on top of `cache` (`context` positions); with memory,
        returns (i, one-row KV of prompt and the whole reply) per member."""
        batch: list[int] = []
        kept: list = []
        for i in sorted(family, key=lambda i: len(encoded[i][0])):  # similar lengths together: fewer pads
            if batch and (len(batch) + 1) * (context + len(encoded[i][0])) > self.max_batch_tokens:
                kept.extend(self._run(batch, encoded, cache, context, out))
                batch = []
            batch.append(i)
        if batch:
            kept.extend(self._run(batch, encoded, cache, context, out))
        return kept

    def _extended(self, cache, tokens: list[int]):
        """A copy of the one-row `cache` continued by `tokens` (up to the deepest layer read)."""
        longer = shared_prefix(cache, 1)
        layer_states(self.target.model, torch.tensor([tokens]), torch.ones(1, len(tokens), dtype=torch.long),
                     (max(self.layers),), longer)
        self.tokens_read += len(tokens)
        return longer

    def _encode(self, reading: Reading) -> tuple[list[int], list[int]]:
        """(the reply's token ids, the token index where each state ends)."""
        encoding = self.target.tokenizer(reading.text, add_special_tokens=False, return_offsets_mapping=True)
        offsets = [tuple(pair) for pair in encoding["offset_mapping"]]
        return list(encoding["input_ids"]), [last_token_before(offsets, end) for end in reading.ends]

    def _run(self, batch: list[int], encoded, cache, context: int, out) -> list:
        width = max(len(encoded[i][0]) for i in batch)
        ids = torch.full((len(batch), width), self.target.pad_token_id, dtype=torch.long)
        mask = torch.zeros((len(batch), width), dtype=torch.long)
        for row, i in enumerate(batch):
            tokens = encoded[i][0]
            ids[row, : len(tokens)] = torch.tensor(tokens)
            mask[row, : len(tokens)] = 1
        past = shared_prefix(cache, len(batch))
        states = layer_states(self.target.model, ids, mask, self.layers, past)
        self.tokens_read += int(mask.sum())
        for row, i in enumerate(batch):
            where = torch.tensor(encoded[i][1], dtype=torch.long)
            out[i] = torch.stack([states[layer][row, where] for layer in self.layers], dim=1).cpu()
        if self.memory is None:
            return []
        return [(i, row_prefix(past, row, context + len(encoded[i][0]))) for row, i in enumerate(batch)]


def families(members: list[int], texts: list[str]) -> list[list[int]]:
    """Readings that differ only in their last line (the children of one state in a search whose
    thoughts are lines) form a family, which reads what comes before that line once."""
    groups: dict[str, list[int]] = {}
    for i, text in zip(members, texts, strict=True):
        stripped = text.rstrip()
        groups.setdefault(stripped[: stripped.rfind("\n") + 1], []).append(i)
    return list(groups.values())


def first_reading_point(encoded: tuple[list[int], list[int]]) -> int:
    """How many leading reply tokens a reading may take from kept KV: those before its first state's end."""
    tokens, ends = encoded
    return min(ends) if ends else len(tokens)


def shared_tokens(encoded: list[tuple[list[int], list[int]]]) -> int:
    """How many leading reply tokens every member of a family shares and may read once: the longest
    common prefix of their token ids, ending before the first token any member reads a state at,
    and none for a family of one."""
    if len(encoded) < 2:
        return 0
    common = min(common_length(encoded[0][0], tokens) for tokens, _ in encoded[1:])
    return min([common, *(min(ends) for _, ends in encoded if ends)])
