"""From model names and server settings to a ready server executor (and a server, for llama-cpp).

- `server`: connect to a running server at `server_url`; the tokenizer comes from `target`.
- `llama-cpp`: start llama.cpp's server on 127.0.0.1 for the run with the target's GGUF file
  (and the draft's, for speculative decoding), connect, and stop it when the executor closes.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

from seed_tot.errors import ConfigError, ModelNotFoundError

DEFAULT_SLOTS = 4  # llama-cpp's slots where the run names none and the model's KV size is not known
# llama.cpp allocates (and clears) the KV cache of every slot at start: slots x context tokens, about
# 28 KiB a token for the default 1.5B target, so 20 slots of 4,096 tokens hold 2.2 GiB.
DEFAULT_CTX_PER_SLOT = 4096
CONNECT_TIMEOUT_S = 30.0


@dataclass
class EngineRun:
    executor: object  # ServerExecutor
    tokenizer: object
    models: dict[str, str]  # what the trace records as `models`
    engine: dict  # what the trace records under config["engine"]


@dataclass(frozen=True)
class EngineSettings:
    """What an engine method starts or connects to (the run's --server-* options)."""

    target: str  # the model whose tokenizer (and, for llama-cpp, GGUF file) the run uses
    draft: str | None = None  # llama-cpp: the draft's GGUF for llama.cpp's speculative decoding
    url: str | None = None  # server: where it runs
    api: str = "auto"
    parallel: int | None = None
    threads: int | None = None
    timeout: float = 600.0
    ctx_per_slot: int = DEFAULT_CTX_PER_SLOT  # llama-cpp: context tokens of each slot


def slot_context(longest_request_tokens: int) -> int:
    """A slot's context for requests of at most `longest_request_tokens` (prompt + new tokens): that,
    with a few tokens to spare, rounded up to 256."""
    return -(-(longest_request_tokens + 16) // 256) * 256


def start_llama_cpp(settings: EngineSettings) -> EngineRun:
    """--method llama-cpp: llama.cpp's server started for the run."""
    return open_llama_cpp(settings.target, settings.draft, settings.parallel, settings.threads, settings.timeout,
                          ctx_per_slot=settings.ctx_per_slot)


def connect_server(settings: EngineSettings) -> EngineRun:
    """--method server: a server already running at `settings.url`."""
    return open_server(settings.url, settings.target, settings.api, settings.parallel, settings.timeout)


def gguf_path(name: str, workdir: Path | None = None, cache_dir: str | None = None) -> str:
    """The GGUF file llama.cpp loads for a model name: a default alias, a .gguf path, or the tiny
    models (written to `workdir`)."""
    from seed_tot.models.registry import ALIASES, cache_root, cached_gguf, has_gguf

    if name in ("tiny", "tiny-target", "tiny-draft"):
        name = "tiny-target" if name == "tiny" else name
        return str(write_tiny_gguf(name, workdir or Path(tempfile.gettempdir()) / "seed-tot-tiny-gguf"))
    if name in ALIASES:
        model, root = ALIASES[name], cache_root(cache_dir)
        if not has_gguf(model, root):
            raise ModelNotFoundError(f"The GGUF file of {model.alias!r} is not in the cache {root}: run `seed-tot models pull`.")
        return str(cached_gguf(model, root))
    if name.endswith(".gguf"):
        if not Path(name).expanduser().is_file():
            raise ModelNotFoundError(f"GGUF file {name!r} does not exist: check the path.")
        return str(Path(name).expanduser())
    raise ConfigError(f"--method llama-cpp runs GGUF files: pass a .gguf file or a default model, not {name!r}.")


def write_tiny_gguf(name: str, directory: Path) -> Path:
    """The tiny in-process model `name` as a float32 GGUF file (same weights, same tokenizer)."""
    from seed_tot.models.gguf_export import write_qwen2_gguf
    from seed_tot.models.tiny import build_tiny_pair

    draft, target, tokenizer = build_tiny_pair()
    path = Path(directory) / f"{name}.gguf"
    if not path.is_file():  # the models are deterministic, so a file written earlier is the same
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = Path(tempfile.mkstemp(dir=path.parent, suffix=".partial")[1])
        write_qwen2_gguf(draft if name == "tiny-draft" else target, tokenizer, partial)
        partial.replace(path)
    return path


def tokenizer_for(name: str):
    from seed_tot.models.loading import load_tokenizer

    return load_tokenizer(name)


def open_server(url: str, target: str, api: str = "auto", parallel: int | None = None,
                timeout: float = 600.0, retries: int = 3) -> EngineRun:
    from seed_tot.engines.connect import connect
    from seed_tot.engines.server_executor import ServerExecutor

    if not url:
        raise ConfigError("--method server needs --server-url, e.g. --server-url http://127.0.0.1:8080.")
    tokenizer = tokenizer_for(target)
    info = connect(url, tokenizer, api, timeout=min(timeout, CONNECT_TIMEOUT_S))
    executor = ServerExecutor(info, tokenizer, parallel=parallel or info.slots or DEFAULT_SLOTS,
                              timeout=timeout, retries=retries, name="server")
    return EngineRun(executor, tokenizer, {"target": info.record.get("model_file") or target}, info.record)


def open_llama_cpp(target: str, draft: str | None = None, slots: int | None = None, threads: int | None = None,
                   timeout: float = 600.0, retries: int = 3, ctx_per_slot: int = DEFAULT_CTX_PER_SLOT) -> EngineRun:
    """Start llama.cpp's server for one run; closing the executor stops it."""
    from seed_tot.engines.connect import connect
    from seed_tot.engines.embedded import LlamaServer, LlamaServerSettings, default_threads
    from seed_tot.engines.server_executor import ServerExecutor

    target_file = gguf_path(target)
    draft_file = gguf_path(draft) if draft else None
    tokenizer = tokenizer_for(target)
    slots = slots or DEFAULT_SLOTS
    threads_given = bool(threads)
    threads = threads or default_threads()
    server = LlamaServer(LlamaServerSettings(target_file, draft_file, slots, ctx_per_slot, threads))
    try:
        info = connect(server.url, tokenizer, "llama.cpp", timeout=CONNECT_TIMEOUT_S)
    except BaseException:
        server.close()
        raise
    import xllamacpp

    info.record.update(xllamacpp=xllamacpp.__version__, started_by="seed-tot", draft_file=draft_file,
                       draft_sha256=_sha(draft_file), ctx_per_slot=ctx_per_slot, threads=threads,
                       slots=slots, threads_rule="--threads" if threads_given else "cores available",
                       cache_prompt=True)  # every request asks for the prompt cache (llama_api.completion_body)
    executor = ServerExecutor(info, tokenizer, parallel=slots, timeout=timeout, retries=retries,
                              name="llama-cpp" + ("+draft" if draft else ""), on_close=server.close)
    executor.server = server
    from seed_tot.records import portable_path

    models = {"target": portable_path(target_file), **({"draft": portable_path(draft_file)} if draft_file else {})}
    return EngineRun(executor, tokenizer, models, info.record)


def _sha(path: str | None) -> str | None:
    from seed_tot.engines.connect import file_sha256

    return file_sha256(path) if path else None

