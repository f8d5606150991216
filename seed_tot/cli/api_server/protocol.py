"""The OpenAI wire format: request bodies read and checked, errors, replies and stream chunks.

Mapped: model ("<task>/<search>"), messages / prompt (the problem), temperature and top_p (the
thoughts' sampling and the sampled chains of thought), max_tokens / max_completion_tokens (each
thought's and chain of thought's token budget), n (independent trees, seeds seed, seed+1, ...),
seed (the run seed every request seed of the tree derives from), stream, stream_options.include_usage,
and the extension object `seed_tot` (search settings, catalog.EXTENSION_FIELDS).
Refused (400): REFUSED below. Every other field is accepted and ignored (IGNORED documents the usual ones).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

MAX_N = 8
MAX_TOKENS = 8192
# the most each `seed_tot` setting may ask for; the work budget (budget.py) bounds their product
EXTENSION_CAPS = {"n_thoughts": 32, "depth": 16, "breadth": 8, "iterations": 64, "value_samples": 16,
                  "cot_samples": 64, "escalate_samples": 64, "value_max_tokens": MAX_TOKENS}

REFUSED = {  # field -> why, for a value other than the harmless ones in _HARMLESS
    "tools": "tool calls are not supported by a reasoning tree",
    "functions": "function calls are not supported by a reasoning tree",
    "logprobs": "log-probabilities of a tree's answer are not defined",
    "top_logprobs": "log-probabilities of a tree's answer are not defined",
    "stop": "stop sequences would cut the tree's thoughts; each task sets its own",
    "logit_bias": "logit bias is not supported",
    "response_format": "only plain text answers are produced",
    "echo": "echo is not supported",
    "best_of": "use n for several independent trees",
    "suffix": "suffix is not supported",
}
IGNORED = ("presence_penalty", "frequency_penalty", "user", "metadata", "store", "parallel_tool_calls",
           "service_tier", "tool_choice", "reasoning_effort", "modalities", "prediction")


class ApiError(Exception):
    """An OpenAI-style error reply: HTTP status and the error object's fields."""

    def __init__(self, status: int, message: str, type_: str = "invalid_request_error",
                 param: str | None = None, code: str | None = None, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status, self.message, self.type, self.param, self.code = status, message, type_, param, code
        self.headers = headers

    def body(self) -> dict:
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}


class _Extension(BaseModel):
    """The `seed_tot` object's bounds; which settings a model id takes is the catalog's to say."""

    model_config = ConfigDict(extra="allow")

    n_thoughts: int | None = Field(None, ge=1, le=EXTENSION_CAPS["n_thoughts"])
    depth: int | None = Field(None, ge=1, le=EXTENSION_CAPS["depth"])
    breadth: int | None = Field(None, ge=1, le=EXTENSION_CAPS["breadth"])
    iterations: int | None = Field(None, ge=1, le=EXTENSION_CAPS["iterations"])
    value_samples: int | None = Field(None, ge=1, le=EXTENSION_CAPS["value_samples"])
    cot_samples: int | None = Field(None, ge=0, le=EXTENSION_CAPS["cot_samples"])
    escalate_samples: int | None = Field(None, ge=0, le=EXTENSION_CAPS["escalate_samples"])
    value_max_tokens: int | None = Field(None, ge=1, le=EXTENSION_CAPS["value_max_tokens"])
    exploration_weight: float | None = Field(None, ge=0, le=100)
    escalate_below: float | None = Field(None, ge=0, le=1)


class _Common(BaseModel):
    model_config = ConfigDict(extra="allow")

    model: str = Field(min_length=1)
    stream: bool = False
    n: int = Field(1, ge=1, le=MAX_N)
    seed: int | None = Field(None, ge=0, lt=2**63)
    temperature: float | None = Field(None, ge=0, le=2)
    top_p: float | None = Field(None, gt=0, le=1)
    max_tokens: int | None = Field(None, ge=1, le=MAX_TOKENS)
    max_completion_tokens: int | None = Field(None, ge=1, le=MAX_TOKENS)
    stream_options: dict[str, Any] | None = None
    seed_tot: _Extension = Field(default_factory=_Extension)


class _Message(BaseModel):
    model_config = ConfigDict(extra="allow")

    role: str
    content: str | list[dict[str, Any]] | None = None


class _ChatBody(_Common):
    messages: list[_Message] = Field(min_length=1)


class _CompletionBody(_Common):
    prompt: str | list[str]


@dataclass
class ParsedRequest:
    kind: str  # "chat" or "completion"
    model: str
    text: str
    stream: bool
    n: int
    seed: int | None
    temperature: float | None
    top_p: float | None
    max_tokens: int | None
    include_usage: bool
    extension: dict[str, Any]


def _validated(cls: type[_Common], body: Any) -> _Common:
    if not isinstance(body, dict):
        raise ApiError(400, "The request body must be a JSON object.")
    try:
        return cls.model_validate(body)
    except ValidationError as exc:
        first = exc.errors()[0]
        param = ".".join(str(part) for part in first["loc"]) or None
        raise ApiError(400, f"Invalid {param}: {first['msg']}.", param=param) from None


def _harmless(name: str, value: Any) -> bool:
    """A value of a refused field that asks for nothing (what clients send by default)."""
    if value is None or value is False or (isinstance(value, (str, list, dict)) and not value):
        return True
    if name == "best_of":
        return type(value) is int and value == 1
    if name == "top_logprobs" or name == "logprobs":
        return type(value) is int and value == 0
    return name == "response_format" and value == {"type": "text"}


def _refuse_unsupported(parsed: _Common) -> None:
    for name, value in (parsed.model_extra or {}).items():
        if name in REFUSED and not _harmless(name, value):
            raise ApiError(400, f"{name} is not supported: {REFUSED[name]}; remove it.", param=name,
                           code="unsupported_parameter")


def _content_text(content: str | list[dict[str, Any]] | None, where: str) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    texts = []
    for index, part in enumerate(content):
        if part.get("type") != "text" or not isinstance(part.get("text"), str):
            raise ApiError(400, "Only text content parts are supported: send the problem as text.",
                           param=f"{where}.content.{index}")
        texts.append(part["text"])
    return "\n".join(texts)


def _common(kind: str, parsed: _Common, text: str) -> ParsedRequest:
    _refuse_unsupported(parsed)
    if parsed.max_tokens is not None and parsed.max_completion_tokens is not None \
            and parsed.max_tokens != parsed.max_completion_tokens:
        raise ApiError(400, "max_tokens and max_completion_tokens differ: give one of them.", param="max_tokens")
    include_usage = bool((parsed.stream_options or {}).get("include_usage"))
    return ParsedRequest(kind=kind, model=parsed.model, text=text.strip(), stream=parsed.stream, n=parsed.n,
                         seed=parsed.seed, temperature=parsed.temperature, top_p=parsed.top_p,
                         max_tokens=parsed.max_tokens or parsed.max_completion_tokens,
                         include_usage=include_usage,
                         extension=parsed.seed_tot.model_dump(exclude_unset=True))


def parse_chat(body: Any) -> ParsedRequest:
    """The problem is the last user message."""
    parsed = _validated(_ChatBody, body)
    users = [(i, m) for i, m in enumerate(parsed.messages) if m.role == "user"]
    if not users:
        raise ApiError(400, "No user message: send the problem as a message with role 'user'.", param="messages")
    index, message = users[-1]
    return _common("chat", parsed, _content_text(message.content, f"messages.{index}"))


def parse_completion(body: Any) -> ParsedRequest:
    parsed = _validated(_CompletionBody, body)
    prompt = parsed.prompt
    if isinstance(prompt, list):
        if len(prompt) != 1:
            raise ApiError(400, "Send one prompt (one problem) per request.", param="prompt")
        prompt = prompt[0]
    return _common("completion", parsed, prompt)


def usage(prompt_tokens: int, completion_tokens: int) -> dict:
    return {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens}


def reply(req: ParsedRequest, reply_id: str, created: int, choices: list[dict], extension: dict) -> dict:
    """The whole (not streamed) reply; each choice: {"content", "finish_reason", "seed_tot"}."""
    tokens = [sum(c["usage"][k] for c in choices) for k in ("prompt_tokens", "completion_tokens")]
    if req.kind == "chat":
        shaped = [{"index": i, "message": {"role": "assistant", "content": c["content"]},
                   "logprobs": None, "finish_reason": c["finish_reason"], "seed_tot": c["seed_tot"]}
                  for i, c in enumerate(choices)]
        obj = "chat.completion"
    else:
        shaped = [{"index": i, "text": c["content"], "logprobs": None, "finish_reason": c["finish_reason"],
                   "seed_tot": c["seed_tot"]} for i, c in enumerate(choices)]
        obj = "text_completion"
    return {"id": reply_id, "object": obj, "created": created, "model": req.model, "system_fingerprint": None,
            "choices": shaped, "usage": usage(*tokens), "seed_tot": extension}


def chunk(req: ParsedRequest, reply_id: str, created: int, index: int | None, *, content: str | None = None,
          role: bool = False, finish_reason: str | None = None, extension: dict | None = None,
          usage_: dict | None = None) -> dict:
    """One stream chunk; index None: a chunk without choices (the usage chunk)."""
    choices = []
    if index is not None:
        if req.kind == "chat":
            delta: dict[str, Any] = {}
            if role:
                delta["role"] = "assistant"
            if content is not None:
                delta["content"] = content
            choices = [{"index": index, "delta": delta, "logprobs": None, "finish_reason": finish_reason}]
        else:
            choices = [{"index": index, "text": content or "", "logprobs": None, "finish_reason": finish_reason}]
    data = {"id": reply_id, "object": "chat.completion.chunk" if req.kind == "chat" else "text_completion",
            "created": created, "model": req.model, "system_fingerprint": None, "choices": choices}
    if extension is not None:
        data["seed_tot"] = extension
    if usage_ is not None:
        data["usage"] = usage_
    return data
