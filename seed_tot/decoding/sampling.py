"""Turning logits into distributions and tokens; every random draw takes an explicit generator.

Greedy decoding is represented as a one-hot distribution at the argmax, so speculative
acceptance (min(1, p/q)) and residual resampling work unchanged for greedy and sampling.
"""

from __future__ import annotations

import torch


def probabilities(logits: torch.Tensor, temperature: float, top_p: float = 1.0) -> torch.Tensor:
    """float32 probabilities over the last axis; temperature 0 gives a one-hot argmax."""
    logits = logits.float()
    if temperature == 0.0:
        probs = torch.zeros_like(logits)
        probs.scatter_(-1, logits.argmax(-1, keepdim=True), 1.0)
        return probs
    probs = torch.softmax(logits / temperature, dim=-1)
    if top_p < 1.0:
        probs = top_p_filter(probs, top_p)
    return probs


def top_p_filter(probs: torch.Tensor, top_p: float) -> torch.Tensor:
    """Keep the smallest set of most likely tokens whose mass reaches top_p; renormalise."""
    sorted_probs, order = probs.sort(dim=-1, descending=True)
    mass_before = sorted_probs.cumsum(-1) - sorted_probs
    sorted_probs = sorted_probs.masked_fill(mass_before >= top_p, 0.0)
    filtered = torch.zeros_like(probs).scatter(-1, order, sorted_probs)
    return filtered / filtered.sum(-1, keepdim=True)


def sample(probs: torch.Tensor, generator: torch.Generator) -> int:
    """Draw one token id from a 1-D distribution."""
    return int(torch.multinomial(probs, 1, generator=generator).item())


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
