"""The target's own confidence in each token of a reply it wrote: one forward, no decoding."""

from __future__ import annotations

import torch


def token_confidence(target, prompt: list[int], reply: list[int]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(log-probability of each reply token, top-1 probability, entropy) under the target, one forward."""
    ids = torch.tensor([prompt + reply])
    with torch.no_grad():
        logits = target.forward(ids)[0, len(prompt) - 1 : -1].float()
    logp = torch.log_softmax(logits, -1)
    written = logp.gather(1, torch.tensor(reply)[:, None]).squeeze(1)
    return written, logp.max(-1).values.exp(), -(logp.exp() * logp).sum(-1)
