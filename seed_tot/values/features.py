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
from seed_tot.runtime.hidden import layer_states, prompt_cache, shared_prefix
from seed_tot.runtime.runner import ModelRunner
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

    def __init__(self, target: ModelRunner, layers: tuple[int, ...], max_batch_tokens: int = 4096) -> None:
        self.target = target
        self.formatter = PromptFormatter(target.tokenizer)
        self.layers = tuple(sorted(set(layers)))
        self.max_batch_tokens = max_batch_tokens
        self.tokens_read = 0  # token positions run through the layers (cost accounting)

    def read(self, readings: list[Reading]) -> list[torch.Tensor]:
        """One (len(ends), len(layers), hidden) tensor per reading, in order."""
        out: list[torch.Tensor | None] = [None] * len(readings)
        groups: dict[str, list[int]] = {}
        for i, reading in enumerate(readings):
            groups.setdefault(reading.message, []).append(i)
        for message, members in groups.items():
            prompt = self.formatter.encode_text(self.formatter.reply_prefix(message))
            cache = prompt_cache(self.target.model, prompt, max(self.layers))
            self.tokens_read += len(prompt)
            encoded = {i: self._encode(readings[i]) for i in members}
            for family in families(members, [readings[i].text for i in members]):
                shared = shared_tokens([encoded[i] for i in family])
                base = self._extended(cache, encoded[family[0]][0][:shared]) if shared else cache
                rest = {i: (encoded[i][0][shared:], [end - shared for end in encoded[i][1]]) for i in family}
                self._read_family(family, rest, len(prompt) + shared, base, out)
        return out

    def _read_family(self, family: list[int], encoded, context: int, cache, out) -> None:
        batch: list[int] = []
        for i in sorted(family, key=lambda i: len(encoded[i][0])):  # similar lengths together: fewer pads
            if batch and (len(batch) + 1) * (context + len(encoded[i][0])) > self.max_batch_tokens:
                self._run(batch, encoded, cache, out)
                batch = []
            batch.append(i)
        if batch:
            self._run(batch, encoded, cache, out)

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

    def _run(self, batch: list[int], encoded, cache, out) -> None:
        width = max(len(encoded[i][0]) for i in batch)
        ids = torch.full((len(batch), width), self.target.pad_token_id, dtype=torch.long)
        mask = torch.zeros((len(batch), width), dtype=torch.long)
        for row, i in enumerate(batch):
            tokens = encoded[i][0]
            ids[row, : len(tokens)] = torch.tensor(tokens)
            mask[row, : len(tokens)] = 1
        states = layer_states(self.target.model, ids, mask, self.layers, shared_prefix(cache, len(batch)))
        self.tokens_read += int(mask.sum())
        for row, i in enumerate(batch):
            where = torch.tensor(encoded[i][1], dtype=torch.long)
            out[i] = torch.stack([states[layer][row, where] for layer in self.layers], dim=1).cpu()


def families(members: list[int], texts: list[str]) -> list[list[int]]:
    """Readings that differ only in their last line (the children of one state in a search whose
    thoughts are lines) form a family, which reads what comes before that line once."""
    groups: dict[str, list[int]] = {}
    for i, text in zip(members, texts, strict=True):
        stripped = text.rstrip()
        groups.setdefault(stripped[: stripped.rfind("\n") + 1], []).append(i)
    return list(groups.values())


def shared_tokens(encoded: list[tuple[list[int], list[int]]]) -> int:
    """How many leading reply tokens every member of a family shares and may read once: the longest
    common prefix of their token ids, ending before the first token any member reads a state at,
    and none for a family of one."""
    if len(encoded) < 2:
        return 0
    first = encoded[0][0]
    common = min(len(tokens) for tokens, _ in encoded)
    for tokens, _ in encoded[1:]:
        common = next((k for k in range(common) if tokens[k] != first[k]), common)
    return max(0, min([common, *(min(ends) for _, ends in encoded if ends)]))
