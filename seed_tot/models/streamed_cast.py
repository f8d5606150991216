"""Load a saved model into another dtype tensor by tensor, so memory peaks near the cast weights.

transformers' loader holds the stored and the cast copies of every weight at once: the default
target stored in float32 (6.6 GiB) peaked at 10.7 GiB when loaded as bfloat16 (3.3 GiB). Here
the model is built without weights (accelerate's `init_empty_weights`), each tensor is read with
plain file reads (no memory map, so the stored copy never counts in the process's memory), cast,
and assigned; the peak is the cast weights plus one stored tensor.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable
from pathlib import Path

import torch

STORED_DTYPES = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16}


def safetensors_header(path: Path) -> tuple[dict, int]:
    """(the tensors' entries, the byte offset where their data starts)."""
    with Path(path).open("rb") as handle:
        (length,) = struct.unpack("<Q", handle.read(8))
        header = json.loads(handle.read(length))
    header.pop("__metadata__", None)
    return header, 8 + length


def stored_dtypes(model_dir: Path) -> set[str]:
    return {entry["dtype"] for path in sorted(Path(model_dir).glob("*.safetensors"))
            for entry in safetensors_header(path)[0].values()}


def needs_streamed_cast(model_dir: Path, dtype: torch.dtype) -> bool:
    """True when the folder's safetensors hold only floating tensors of another dtype."""
    kinds = stored_dtypes(model_dir)
    return bool(kinds) and kinds <= set(STORED_DTYPES) and {STORED_DTYPES[k] for k in kinds} != {dtype}


def read_cast(model_dir: Path, dtype: torch.dtype, keep: Callable[[str], bool] | None = None):
    """Every tensor of the folder's safetensors (or those whose names `keep` accepts), cast to
    `dtype` as it is read: (name, tensor)."""
    for path in sorted(Path(model_dir).glob("*.safetensors")):
        header, data_start = safetensors_header(path)
        with path.open("rb") as handle:
            for name, entry in header.items():
                if keep is not None and not keep(name):
                    continue
                start, end = entry["data_offsets"]
                handle.seek(data_start + start)
                raw = torch.empty(end - start, dtype=torch.uint8)
                handle.readinto(memoryview(raw.numpy()))
                yield name, raw.view(STORED_DTYPES[entry["dtype"]]).reshape(entry["shape"]).to(dtype)


def load_streamed(model_dir: str, dtype: torch.dtype, attn: str | None = None):
    """The model of `model_dir` in `dtype`, built without weights and filled tensor by tensor."""
    from accelerate import init_empty_weights
    from transformers import AutoConfig, AutoModelForCausalLM, GenerationConfig

    config = AutoConfig.from_pretrained(model_dir)
    kwargs = {"attn_implementation": attn} if attn else {}
    with init_empty_weights():
        model = AutoModelForCausalLM.from_config(config, dtype=dtype, **kwargs)
    model.load_state_dict(dict(read_cast(Path(model_dir), dtype)), strict=False, assign=True)
    model.tie_weights()
    empty = [name for name, tensor in [*model.named_parameters(), *model.named_buffers()] if tensor.is_meta]
    if empty:
        raise ValueError(f"{model_dir} holds no weights for {', '.join(empty[:3])}")
    if (Path(model_dir) / "generation_config.json").is_file():
        model.generation_config = GenerationConfig.from_pretrained(model_dir)
    return model.eval()
