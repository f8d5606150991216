"""BiTA's training loss on one sample: mask groups anchored inside the frozen model's own output.

A group of M mask tokens hangs under sequence token a (it sees the learnable prefix, the
sequence up to a, and the group's earlier masks) and mask j is trained to predict token
a + 2 + j: the same layout the decoder uses (a node's own logits give token a + 1). Cross-entropy
on those tokens; only the prefix and the mask embeddings receive gradients.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from seed_tot.decoding.bita_params import BitaPrompt
from seed_tot.runtime import ModelRunner
from seed_tot.runtime.masks import anchored_chains_mask
from seed_tot.runtime.prefix import decoder_hidden, lm_logits, prefixed_cache, sequence_cache


def anchor_range(prompt_len: int, total_len: int, masks: int) -> range:
    """Anchors whose M labels all exist: from the last prompt token on (its group drafts response
    tokens 2..M+1) to the last token with M tokens after the next one."""
    return range(max(0, prompt_len - 1), max(0, total_len - masks - 1))


def pick_anchors(prompt_len: int, total_len: int, masks: int, groups: int, generator: torch.Generator) -> list[int]:
    """Up to `groups` distinct anchors drawn uniformly (seeded), sorted."""
    candidates = anchor_range(prompt_len, total_len, masks)
    if len(candidates) <= groups:
        return list(candidates)
    picks = torch.randperm(len(candidates), generator=generator)[:groups]
    return sorted(candidates[i] for i in picks.tolist())


def group_labels(sequence: list[int], anchors: list[int], masks: int) -> torch.Tensor:
    return torch.tensor([sequence[a + 2 + j] for a in anchors for j in range(masks)], dtype=torch.long)


def mask_group_logits(runner: ModelRunner, prompt: BitaPrompt, sequence: list[int], anchors: list[int]) -> torch.Tensor:
    """(G*M, V) float32 logits of the mask groups under `anchors`, differentiable in `prompt`."""
    model, masks = runner.model, prompt.masks
    cache = prefixed_cache(prompt.layer_kv(model.dtype, model.device), sequence_cache(model, sequence))
    mask, positions = anchored_chains_mask(anchors, masks, len(sequence), prompt.prefix_len, model.dtype)
    embeds = prompt.mask_embeddings.repeat(len(anchors), 1).unsqueeze(0)
    hidden = decoder_hidden(model, embeds, cache, positions, mask)
    return lm_logits(model, hidden[0])


def sample_loss(
    runner: ModelRunner, prompt: BitaPrompt, prompt_ids: list[int], response_ids: list[int], groups: int,
    generator: torch.Generator,
) -> tuple[torch.Tensor, dict] | None:
    """Mean cross-entropy of up to `groups` mask groups on one sample (None if it is too short),
    and counts: groups, and per mask position how often its argmax equals the label."""
    for weight in runner.model.parameters():
        weight.requires_grad_(False)  # the model stays frozen: only `prompt` is trained
    sequence = list(prompt_ids) + list(response_ids)
    anchors = pick_anchors(len(prompt_ids), len(sequence), prompt.masks, groups, generator)
    if not anchors:
        return None
    logits = mask_group_logits(runner, prompt, sequence, anchors)
    labels = group_labels(sequence, anchors, prompt.masks).to(logits.device)
    loss = F.cross_entropy(logits, labels)
    hits = (logits.argmax(-1) == labels).view(len(anchors), prompt.masks).sum(0).tolist()
    return loss, {"groups": len(anchors), "hits": hits}
