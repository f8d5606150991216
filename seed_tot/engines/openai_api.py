"""OpenAI-compatible `/v1/completions` (vLLM, SGLang): token-id prompts, a seed per request.

Extra sampling fields are the servers' own names for "no other sampler": vLLM and SGLang read
them, other servers ignore fields they do not know. Token ids come back where the server returns
them (`token_ids` with `return_token_ids`: vLLM, SGLang). A server that answers with text only
(llama.cpp's own `/v1/completions`, older servers) is refused: text does not give back the
generated tokens (a byte sequence that is not valid UTF-8 is lost, a stop string is cut off).
"""

from __future__ import annotations

from seed_tot.requests import GenerationRequest, GenerationStats

PATH = "/v1/completions"
NEUTRAL_SAMPLERS = {"top_k": -1, "min_p": 0.0, "repetition_penalty": 1.0, "presence_penalty": 0.0, "frequency_penalty": 0.0}


def completion_body(request: GenerationRequest, model: str) -> dict:
    config = request.config
    return {
        "model": model,
        "prompt": list(request.prompt_ids),
        "max_tokens": config.max_new_tokens,
        "temperature": config.temperature,
        "top_p": config.top_p,
        "seed": request.seed,
        "stop": config.server_stops or None,
        "ignore_eos": config.ignore_eos,
        "include_stop_str_in_output": True,
        "skip_special_tokens": True,
        "return_token_ids": True,
        "n": 1,
        "stream": False,
        **NEUTRAL_SAMPLERS,
    }


def choice(reply: dict) -> dict:
    choices = reply.get("choices") or [{}]
    return choices[0]


def reply_tokens(reply: dict) -> list[int] | None:
    """The generated token ids, or None when the reply carries none (an empty list is no tokens)."""
    first = choice(reply)
    ids = first.get("token_ids")
    if ids is None:
        ids = first.get("output_ids")
    return None if ids is None else [int(t) for t in ids]


def text_only_message(url: str) -> str:
    return (
        f"The server at {url} answers {PATH} with text but not the generated token ids (`return_token_ids`), "
        "so its tokens cannot be taken exactly: use a server that returns them (vLLM, SGLang) or, "
        "for llama.cpp, --server-api llama.cpp."
    )


def finish_reason(reply: dict) -> str:
    first = choice(reply)
    if first.get("finish_reason") == "length":
        return "length"
    return "stop" if isinstance(first.get("stop_reason"), str) else "eos"


def reply_stats(reply: dict, new_tokens: int) -> GenerationStats:
    return GenerationStats(new_tokens=new_tokens, target_forwards=new_tokens)


def cached_prompt_tokens(reply: dict) -> int:
    """Prompt tokens the server served from its prefix cache (`usage.prompt_tokens_details.cached_tokens`;
    vLLM reports it with --enable-prompt-tokens-details, SGLang with --enable-cache-report), else 0."""
    details = (reply.get("usage") or {}).get("prompt_tokens_details") or {}
    return int(details.get("cached_tokens") or 0)
