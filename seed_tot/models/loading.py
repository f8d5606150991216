"""Load a model + tokenizer from an alias, a local directory, a .gguf file or a hub id."""

from __future__ import annotations

import logging
import time
from functools import lru_cache
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, GgufConfig

from seed_tot.errors import ModelNotFoundError, SeedTotError, TokenizerMismatchError
from seed_tot.models.streamed_cast import load_streamed, stored_float_dtypes
from seed_tot.models.registry import ALIASES, cache_root, cached_model_dir, is_cached
from seed_tot.models.tiny import build_tiny_pair
from seed_tot.runtime.int8_linear import int8_layer_count, quantize_linear_layers, require_int8
from seed_tot.runtime.packed_linear import pack_linear_layers, packed_layer_count, packing_applies, packing_works
from seed_tot.runtime.runner import ModelRunner

log = logging.getLogger(__name__)

TINY_ALIASES = {"tiny", "tiny-target", "tiny-draft"}
_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


@lru_cache(maxsize=1)
def cpu_flags() -> frozenset[str]:
    try:
        return frozenset(Path("/proc/cpuinfo").read_text().split())
    except OSError:
        return frozenset()


def cpu_supports_bf16() -> bool:
    """True when the CPU has native bfloat16 arithmetic (AVX-512 BF16 or AMX)."""
    return bool({"avx512_bf16", "amx_bf16"} & cpu_flags())


def cpu_supports_fp16() -> bool:
    """True when the CPU has native float16 arithmetic (AVX-512 FP16 or AMX-FP16)."""
    return bool({"avx512_fp16", "amx_fp16"} & cpu_flags())


def resolve_device(device: str = "auto") -> torch.device:
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


def _named_dtype(dtype: str) -> torch.dtype:
    if dtype not in _DTYPES:
        raise SeedTotError(f"Unknown dtype {dtype!r}: use auto, float32, bfloat16 or float16.")
    return _DTYPES[dtype]


def dtype_name(dtype: torch.dtype) -> str:
    """torch.bfloat16 -> "bfloat16": the name --dtype and the trace use."""
    return str(dtype).removeprefix("torch.")


def resolve_dtype(dtype: str | torch.dtype, device: torch.device, name: str = "") -> torch.dtype:
    """The dtype a model computes in. 'auto': bfloat16 on CUDA; on a CPU, float16 where it has
    native float16 arithmetic, else bfloat16 where it has native bfloat16, else float32; tiny
    models use float32.

    float16 before bfloat16 on a CPU with both, because it is both faster at the batch widths many
    trees run at and closer to float32 (measured: docs/models.md#float16-on-a-cpu-with-avx-512-fp16);
    ModelRunner refuses a float16 forward that overflows.
    """
    if isinstance(dtype, torch.dtype):
        return dtype
    if dtype != "auto":
        return _named_dtype(dtype)
    if name in TINY_ALIASES:
        return torch.float32
    if device.type == "cuda":
        return torch.bfloat16
    if cpu_supports_fp16():
        return torch.float16
    return torch.bfloat16 if cpu_supports_bf16() else torch.float32


def resolve_draft_dtype(dtype: str | torch.dtype, target_dtype: torch.dtype, device: torch.device) -> torch.dtype:
    """The dtype a draft model computes in. 'auto': the target's, except that a float16 target on
    a CPU where packed bfloat16 products work gets a bfloat16 draft. A draft runs narrow forwards
    (one row per SEED worker, a few per batch), where packed bfloat16 is faster than float16
    (measured: docs/models.md#a-bfloat16-draft-beside-a-float16-target). The draft's dtype can change how many of its
    tokens the target accepts, never the output: the target verifies every token."""
    if dtype != "auto":
        return resolve_dtype(dtype, device)
    if device.type == "cpu" and target_dtype == torch.float16 and packing_works(torch.bfloat16):
        return torch.bfloat16
    return target_dtype


def load_draft(
    name: str, target: ModelRunner, dtype: str | torch.dtype = "auto", cache_dir: str | None = None
) -> ModelRunner:
    """Load a draft model beside a loaded target, on its device, in resolve_draft_dtype's dtype."""
    return load_model(name, resolve_draft_dtype(dtype, target.dtype, target.device), str(target.device), cache_dir)


def resolve_storage_dtype(dtype: str, device: torch.device) -> torch.dtype:
    """The dtype pulled weights are saved in. 'auto': bfloat16 (the released checkpoints' own
    dtype) on CUDA or a CPU with native bfloat16 or float16, else float32. Loading converts
    bfloat16 to float16 exactly (float16 has more mantissa bits; only values under 6e-5 lose some)."""
    if dtype != "auto":
        return _named_dtype(dtype)
    if device.type == "cuda" or cpu_supports_bf16() or cpu_supports_fp16():
        return torch.bfloat16
    return torch.float32


def _load_tiny(name: str, dtype: torch.dtype):
    draft, target, tokenizer = build_tiny_pair(dtype=dtype)
    return (draft if name == "tiny-draft" else target), tokenizer


def _load_pretrained(
    source: str, dtype: torch.dtype, gguf_file: str | None = None, attn: str | None = None, pack: bool = False,
    int8: bool = False,
):
    kwargs = {"dtype": dtype}
    if attn:
        kwargs["attn_implementation"] = attn
    if gguf_file:
        kwargs["gguf_file"] = gguf_file
        # Packed GGUF weights make multi-token forwards slow: always dequantize fully.
        kwargs["quantization_config"] = GgufConfig(dequantize=True)
    tok_kwargs = {"gguf_file": gguf_file} if gguf_file else {}
    tokenizer = AutoTokenizer.from_pretrained(source, **tok_kwargs)
    stored = stored_float_dtypes(Path(source)) if not gguf_file and Path(source).is_dir() else None
    # Streamed: a cast peaks at a third of transformers' memory; packing (or int8) goes one layer
    # at a time, so the plain copies never pile up.
    if stored is not None and (stored != {dtype} or pack or int8):
        return load_streamed(source, dtype, attn, pack=pack, int8=int8), tokenizer
    model = AutoModelForCausalLM.from_pretrained(source, **kwargs)
    return model, tokenizer


def _locate(name: str, cache_dir: str | None) -> tuple[str, str | None]:
    """Map a user-given model name to (from_pretrained source, gguf file name or None)."""
    if name in ALIASES:
        default = ALIASES[name]
        root = cache_root(cache_dir)
        if not is_cached(default, root):
            raise ModelNotFoundError(
                f"Default model {default.alias!r} is not in the cache {root}: run `seed-tot models pull` first."
            )
        return str(cached_model_dir(default, root)), None
    path = Path(name).expanduser()
    if name.endswith(".gguf"):
        if not path.is_file():
            raise ModelNotFoundError(f"GGUF file {name!r} does not exist: check the path.")
        return str(path.parent), path.name
    if path.exists():
        if not (path / "config.json").is_file():
            raise ModelNotFoundError(
                f"Directory {name!r} has no config.json: point to a saved transformers model directory."
            )
        return str(path), None
    if name.startswith((".", "/", "~")) or name.count("/") > 1:
        raise ModelNotFoundError(f"Model path {name!r} does not exist: check the path.")
    return name, None


def local_model_dir(name: str, cache_dir: str | None = None) -> Path | None:
    """The folder of a cached default model or of a saved transformers model; None for the tiny
    models, GGUF files, hub ids and models not yet pulled."""
    if name in TINY_ALIASES or name.endswith(".gguf"):
        return None
    try:
        source, gguf_file = _locate(name, cache_dir)
    except ModelNotFoundError:
        return None
    path = Path(source)
    return path if gguf_file is None and (path / "config.json").is_file() else None


def load_model(
    name: str,
    dtype: str | torch.dtype = "auto",
    device: str = "auto",
    cache_dir: str | None = None,
    attn_implementation: str | None = None,
    int8: bool = False,
) -> ModelRunner:
    """Load one model (alias, local dir, .gguf or hub id) and wrap it in a ModelRunner.

    int8: its linear layers int8 (seed_tot.runtime.int8_linear; lossy, CPU only), but the MLP's
    down projections, which stay in `dtype` (packed where packing applies)."""
    dev = resolve_device(device)
    torch_dtype = resolve_dtype(dtype, dev, name)
    if int8:
        require_int8(dev)
    started = time.perf_counter()
    if name in TINY_ALIASES:
        model, tokenizer = _load_tiny(name, torch_dtype)
    else:
        source, gguf_file = _locate(name, cache_dir)
        try:
            pack = packing_applies(dev, torch_dtype)
            model, tokenizer = _load_pretrained(source, torch_dtype, gguf_file, attn_implementation, pack, int8)
        except (OSError, ValueError) as exc:
            raise ModelNotFoundError(
                f"Could not load model {name!r} ({type(exc).__name__}: {str(exc).splitlines()[0][:200]}); "
                "pass a local directory or .gguf file, or run `seed-tot models pull` for the default pair."
            ) from exc
    model = model.to(dev)
    if int8:
        quantize_linear_layers(model)  # what the load left 16-bit (tiny models; a tied output head)
    pack_linear_layers(model)  # what the load left plain (a tied output head; every layer of other loads)
    log.info("loaded %s (%s, %s, %d linear layers packed, %d int8) in %.1f s", name, torch_dtype, dev,
             packed_layer_count(model), int8_layer_count(model), time.perf_counter() - started)
    return ModelRunner(model, tokenizer, name=name)


def load_tokenizer(name: str, cache_dir: str | None = None):
    """The tokenizer of a model name (alias, dir, .gguf, hub id) without loading its weights.

    Used to check a draft/target pair before starting processes that load the weights.
    """
    if name in TINY_ALIASES:
        return _load_tiny(name, torch.float32)[1]
    source, gguf_file = _locate(name, cache_dir)
    try:
        return AutoTokenizer.from_pretrained(source, **({"gguf_file": gguf_file} if gguf_file else {}))
    except (OSError, ValueError) as exc:
        raise ModelNotFoundError(
            f"Could not load the tokenizer of {name!r} ({type(exc).__name__}: {str(exc).splitlines()[0][:200]}); "
            "pass a local directory or .gguf file, or run `seed-tot models pull` for the default pair."
        ) from exc


def tokenizers_match(first, second) -> bool:
    """Same vocabulary (token -> id) and the same special end-of-sequence token."""
    if first is None or second is None:
        return first is None and second is None
    if first.eos_token_id != second.eos_token_id:
        return False
    return first.get_vocab() == second.get_vocab()


def check_pair(draft: ModelRunner, target: ModelRunner) -> None:
    """Refuse a draft/target pair that does not share one tokenizer."""
    if not tokenizers_match(draft.tokenizer, target.tokenizer):
        raise TokenizerMismatchError(
            f"Draft model {draft.name!r} and target model {target.name!r} use different tokenizers: "
            "speculative decoding needs a pair from one tokenizer family."
        )


def load_pair(
    draft: str,
    target: str,
    dtype: str | torch.dtype = "auto",
    device: str = "auto",
    cache_dir: str | None = None,
) -> tuple[ModelRunner, ModelRunner]:
    """Load a draft/target pair; refuse it before any decoding when the tokenizers differ. With
    dtype 'auto' the draft's dtype follows resolve_draft_dtype."""
    target_runner = load_model(target, dtype, device, cache_dir)
    draft_runner = load_draft(draft, target_runner, dtype, cache_dir)
    check_pair(draft_runner, target_runner)
    return draft_runner, target_runner
