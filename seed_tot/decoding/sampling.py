"""Turning logits into distributions and tokens; every random draw takes an explicit generator.

Greedy decoding is represented as a one-hot distribution at the argmax, so speculative
acceptance (min(1, p/q)) and residual resampling work unchanged for greedy and sampling.
"""

from __future__ import annotations

import torch


def probabilities(logits: torch.Tensor, temperature: float, top_p: float = 1.0) -> torch.Tensor:
    """float32 probabilities over the last axis, on the CPU; temperature 0 gives a one-hot argmax.

    Computed on the logits' device, then returned on the CPU, where every draw and acceptance
    test runs (their generators are CPU generators), so a model on a GPU decodes the same way."""
    logits = logits.float()
    if temperature == 0.0:
        probs = torch.zeros_like(logits)
        probs.scatter_(-1, logits.argmax(-1, keepdim=True), 1.0)
        return probs.cpu()
    probs = torch.softmax(logits / temperature, dim=-1)
    if top_p < 1.0:
        probs = top_p_filter(probs, top_p)
    return probs.cpu()


# Nucleus sets are usually far smaller than this; a row whose set is not is sorted in full.
TOP_P_CANDIDATES = 1024


def top_p_filter(probs: torch.Tensor, top_p: float) -> torch.Tensor:
    """Keep the most likely tokens whose mass reaches top_p; renormalise.

    Every token at least as likely as the last one needed (most likely first) is kept, so tokens
    tied at the cut are all kept and the set never depends on how a sort orders ties. The cut is
    looked for among each row's TOP_P_CANDIDATES most likely tokens (a full sort of a 150k
    vocabulary per row cost more than a 39-row model step on the 2-core CPU); rows whose
    candidates hold less than top_p are sorted in full.
    """
    flat = probs.reshape(-1, probs.shape[-1])
    top = flat.topk(min(TOP_P_CANDIDATES, flat.shape[-1]), dim=-1).values
    cut = _cut(top, top_p)
    wide = (top.cumsum(-1)[:, -1] < top_p).nonzero().flatten()
    if wide.numel():
        cut[wide] = _cut(flat[wide].sort(dim=-1, descending=True).values, top_p)
    kept = flat.masked_fill(flat < cut, 0.0)
    return (kept / kept.sum(-1, keepdim=True)).reshape(probs.shape)


def _cut(top: torch.Tensor, top_p: float) -> torch.Tensor:
    """(rows, 1): the probability of the last token each row needs, most likely first (`top`,
    descending), before the mass of the tokens ahead of it reaches top_p."""
    needed = ((top.cumsum(-1) - top) < top_p).sum(-1, keepdim=True)
    return top.gather(-1, needed - 1)


def sample(probs: torch.Tensor, generator: torch.Generator) -> int:
    """Draw one token id from a 1-D distribution by inverting its float64 cumulative sums with
    one uniform draw (torch.multinomial draws one exponential per vocabulary entry). A token of
    probability 0 is never drawn."""
    cdf = probs.detach().cpu().double().cumsum(0)
    point = float(torch.rand((), dtype=torch.float64, generator=generator)) * float(cdf[-1])
    index = int(torch.searchsorted(cdf, torch.tensor(point, dtype=torch.float64), right=True))
    if index >= len(cdf):  # the point rounded up to the total
        index = int(probs.nonzero()[-1])
    return index


def residual(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """norm(max(0, p - q)): what to sample after a draft token was rejected."""
    diff = (p - q).clamp(min=0.0)
    total = diff.sum()
    if total <= 0:
        return p
    return diff / total


def accept_probability(p: torch.Tensor, q: torch.Tensor, token: int) -> float:
    """min(1, p(x)/q(x)) for a token x drawn from q."""
    q_x = float(q[token])
    if q_x <= 0.0:
        return 0.0
    return min(1.0, float(p[token]) / q_x)


def uniform(generator: torch.Generator) -> float:
    return float(torch.rand((), generator=generator).item())


def one_hot(token: int, vocab_size: int) -> torch.Tensor:
    """The q of a deterministic proposal (greedy top-k, n-gram lookup): all mass on `token`."""
    q = torch.zeros(vocab_size, dtype=torch.float32)
    q[token] = 1.0
    return q
