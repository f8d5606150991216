"""Scoring requests (`GenerationRequest.score_tokens`): one forward over the prompt, no tokens generated.

The State Evaluator's logit mode asks for the next-token log-probabilities of its verdict words
after a verdict prefix. Executors that can serve such requests build their results here.
"""

from __future__ import annotations

import torch

from seed_tot.requests import GenerationRequest, GenerationResult, GenerationStats


def is_scoring(request: GenerationRequest) -> bool:
    return request.score_tokens is not None


def scored_result(request: GenerationRequest, logits: torch.Tensor, seconds: float, ticket: int = 0) -> GenerationResult:
    """The result of a scoring request from the logits after its prompt (V,)."""
    logprobs = torch.log_softmax(logits.float(), dim=-1)
    ids = torch.tensor(request.score_tokens, dtype=torch.long, device=logprobs.device)
    return GenerationResult(
        request_id=request.request_id or str(ticket),
        token_ids=[],
        text="",
        finish_reason="stop",  # nothing was generated, by request
        stats=GenerationStats(target_forwards=1, wall_seconds=seconds),
        candidate_logprobs=[float(v) for v in logprobs[ids].tolist()],
    )
