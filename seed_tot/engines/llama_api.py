"""llama.cpp's native `/completion`: one GenerationRequest as a request body, the reply as a result.

The sampler chain is pinned to temperature then top-p, every other sampler neutral, so tokens
are drawn from the same distribution the project's own decoders sample (greedy at temperature 0).
"""

from __future__ import annotations

from seed_tot.requests import GenerationRequest, GenerationStats

PATH = "/completion"
# Every llama.cpp sampler that could change the distribution, set to its neutral value.
NEUTRAL_SAMPLERS = {
    "top_k": 0,
    "min_p": 0.0,
    "typical_p": 1.0,
    "xtc_probability": 0.0,
    "repeat_penalty": 1.0,
    "repeat_last_n": 0,
    "presence_penalty": 0.0,
    "frequency_penalty": 0.0,
    "dry_multiplier": 0.0,
    "mirostat": 0,
    "dynatemp_range": 0.0,
    "top_n_sigma": -1.0,
    "n_probs": 0,
    "samplers": ["top_p", "temperature"],
}
_FINISH = {"eos": "eos", "word": "stop", "limit": "length"}


def completion_body(request: GenerationRequest) -> dict:
    config = request.config
    return {
        "prompt": list(request.prompt_ids),
        "n_predict": config.max_new_tokens,
        "temperature": config.temperature,
        "top_p": config.top_p,
        "seed": request.seed,
        "stop": config.server_stops,
        "ignore_eos": config.ignore_eos,
        "return_tokens": True,
        "cache_prompt": True,
        "stream": False,
        **NEUTRAL_SAMPLERS,
    }


def finish_reason(reply: dict) -> str:
    return _FINISH.get(reply.get("stop_type", ""), "length")


def reply_tokens(reply: dict) -> list[int]:
    return [int(t) for t in reply.get("tokens") or []]


def reply_stats(reply: dict, new_tokens: int) -> GenerationStats:
    """Draft counters from llama.cpp's timings; one target forward per verify step is not reported,
    so target_forwards counts the decode steps llama.cpp reports (predicted_n minus accepted drafts)."""
    timings = reply.get("timings") or {}
    proposed = int(timings.get("draft_n") or 0)
    accepted = int(timings.get("draft_n_accepted") or 0)
    return GenerationStats(
        new_tokens=new_tokens,
        draft_tokens_proposed=proposed,
        draft_tokens_accepted=accepted,
        target_forwards=max(new_tokens - accepted, 0),
    )


def cached_prompt_tokens(reply: dict) -> int:
    timings = reply.get("timings") or {}
    return int(timings.get("cache_n") or 0)
