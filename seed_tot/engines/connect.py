"""Before any problem starts: reach the server, learn its API, check its tokenizer, describe it.

Every failure here is one EngineError sentence (the CLI exits with code 2): a wrong URL or a dead
server, no reply in time, a server that speaks neither API, a tokenizer that splits the probe
text differently from the local one (prompts go to the server as token ids, so the two must agree),
or an OpenAI-compatible server that does not return the generated token ids.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

from seed_tot.config import DecodeConfig
from seed_tot.engines import llama_api, openai_api
from seed_tot.engines.http import Refused, Unreachable, call_json
from seed_tot.errors import EngineError, TokenizerMismatchError
from seed_tot.records import portable_path
from seed_tot.requests import GenerationRequest

# Spaces, digits, punctuation, a newline and non-ASCII letters: where tokenizers usually differ.
PROBE_TEXT = "Tree of thoughts: 12 + 30 = 42.\n  Naïve café, 東京 ✓"


@dataclass
class ServerInfo:
    url: str
    api: str  # "llama.cpp" or "openai"
    model: str  # the name the server gives its model (the OpenAI "model" field)
    slots: int | None
    record: dict = field(default_factory=dict)  # what traces record about the engine


def connect(url: str, tokenizer, api: str = "auto", timeout: float = 10.0) -> ServerInfo:
    """Reach `url`, check its tokenizer against `tokenizer` and return what to record about it."""
    url = url.rstrip("/")
    if api not in ("auto", "llama.cpp", "openai"):
        raise EngineError(f"Unknown server API {api!r}: use auto, llama.cpp or openai.")
    info = _llama_info(url, timeout) if api in ("auto", "llama.cpp") else None
    if info is None:
        if api == "llama.cpp":
            raise EngineError(f"The server at {url} has no llama.cpp /props endpoint: check --server-url or use --server-api openai.")
        info = _openai_info(url, timeout)
    check_tokenizer(info, tokenizer, timeout)
    if info.api == "openai":
        check_token_ids(info, tokenizer, timeout)
    return info


def _get(url: str, path: str, timeout: float, body: dict | None = None) -> dict:
    try:
        return call_json(url, path, body, timeout)
    except Unreachable as exc:
        raise EngineError(
            f"Cannot reach the server at {url} ({exc}): start it (e.g. `seed-tot serve`) or check --server-url."
        ) from None


def _llama_info(url: str, timeout: float) -> ServerInfo | None:
    try:
        props = _get(url, "/props", timeout)
    except Refused:
        return None
    if "default_generation_settings" not in props:
        return None
    model_path = props.get("model_path", "")
    record = {
        "engine": "llama.cpp",
        "url": url,
        "build": props.get("build_info", ""),
        "model_file": portable_path(model_path) if model_path else model_path,  # the cache as ~/...
        "model_sha256": file_sha256(model_path),
        "slots": props.get("total_slots"),
        "speculative": props.get("default_generation_settings", {}).get("params", {}).get("speculative.types", ""),
        "sampler": {"order": ["top_p", "temperature"], "per_request": ["temperature", "top_p", "seed"],
                    **{k: v for k, v in llama_api.NEUTRAL_SAMPLERS.items() if k != "samplers"}},
    }
    return ServerInfo(url, "llama.cpp", model_path, props.get("total_slots"), record)


def _openai_info(url: str, timeout: float) -> ServerInfo:
    try:
        models = _get(url, "/v1/models", timeout)
    except Refused as exc:
        raise EngineError(f"The server at {url} answers neither llama.cpp's /props nor /v1/models ({exc}): check --server-url.") from None
    entries = models.get("data") or []
    if not entries:
        raise EngineError(f"The server at {url} lists no model under /v1/models: start it with a model.")
    model = str(entries[0].get("id", ""))
    version = _optional(url, "/version", timeout).get("version", "")
    record = {
        "engine": entries[0].get("owned_by") or "openai-compatible",
        "url": url,
        "build": version,
        "model_file": model,
        "model_sha256": None,
        "slots": None,
        "sampler": {"per_request": ["temperature", "top_p", "seed"], "top_k": -1, "min_p": 0.0, "repetition_penalty": 1.0},
    }
    return ServerInfo(url, "openai", model, None, record)


def _optional(url: str, path: str, timeout: float) -> dict:
    try:
        return call_json(url, path, None, timeout)
    except (Refused, Unreachable):
        return {}


def server_tokens(info: ServerInfo, text: str, timeout: float) -> list[int] | None:
    """The server's token ids for `text` (no special tokens added), or None without /tokenize."""
    body = {"content": text, "add_special": False}  # llama.cpp's names, also on its OpenAI-compatible side
    if info.api == "openai":
        body.update(model=info.model, prompt=text, add_special_tokens=False)  # vLLM's and SGLang's names
    try:
        reply = _get(info.url, "/tokenize", timeout, body)
    except Refused:
        return None
    tokens = reply.get("tokens")
    return [int(t) for t in tokens] if tokens or not text else None  # no tokens for a text: fields not read


def check_tokenizer(info: ServerInfo, tokenizer, timeout: float) -> None:
    local = [int(t) for t in tokenizer.encode(PROBE_TEXT, add_special_tokens=False)]
    remote = server_tokens(info, PROBE_TEXT, timeout)
    if remote is None:
        raise EngineError(
            f"The server at {info.url} has no /tokenize endpoint that tokenizes the probe text, so its tokenizer "
            "cannot be checked: use a server with one (llama.cpp, vLLM)."
        )
    if remote != local:
        raise TokenizerMismatchError(
            f"The server at {info.url} splits text into other tokens than the local tokenizer "
            f"({len(remote)} vs {len(local)} tokens for a probe text): pass the server's model as --target."
        )


def check_token_ids(info: ServerInfo, tokenizer, timeout: float) -> None:
    """Ask for one greedy token: an OpenAI-compatible server must return the generated token ids."""
    prompt = [int(t) for t in tokenizer.encode(PROBE_TEXT, add_special_tokens=False)]
    request = GenerationRequest(prompt, DecodeConfig(max_new_tokens=1), 0, "connect-probe")
    try:
        reply = _get(info.url, openai_api.PATH, timeout, openai_api.completion_body(request, info.model))
    except Refused as exc:
        raise EngineError(
            f"The server at {info.url} refused a one-token completion ({exc}): check --server-url and --target."
        ) from None
    if openai_api.reply_tokens(reply) is None:
        raise EngineError(openai_api.text_only_message(info.url))


def file_sha256(path: str) -> str | None:
    """sha256 of a local model file; a default model pulled by seed-tot reuses its verified checksum."""
    file = Path(path)
    if not path or not file.is_file():
        return None
    from seed_tot.models.registry import DEFAULT_MODELS

    for model in DEFAULT_MODELS:
        if file.name == model.gguf_name and file.stat().st_size == model.size:
            return model.sha256  # `seed-tot models pull` checked it before keeping the file
    digest = hashlib.sha256()
    with open(file, "rb") as handle:
        while chunk := handle.read(8 * 1024 * 1024):
            digest.update(chunk)
    return digest.hexdigest()
