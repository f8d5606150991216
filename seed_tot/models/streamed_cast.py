"""Load a saved model into another dtype tensor by tensor, so memory peaks near the cast weights.

transformers' loader holds the stored and the cast copies of every weight at once: the default
target stored in float32 (6.6 GiB) peaked at 10.7 GiB when loaded as bfloat16 (3.3 GiB). Here
the model is built without weights (accelerate's `init_empty_weights`), each tensor is read with
plain file reads (no memory map, so the stored copy never counts in the process's memory), cast,
and assigned; the peak is the cast weights plus one stored tensor. The same streamed read, in the
stored dtype, lets linear layers be packed one at a time as they arrive (`pack=True`); there,
embedding tables are mapped from the file instead of read (`read_cast`'s `mapped`).
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


def stored_float_dtypes(model_dir: Path) -> set[torch.dtype] | None:
    """The dtypes of the folder's safetensors, or None where it holds none, or a tensor read_cast
    cannot read (an integer or quantized one)."""
    kinds = {entry["dtype"] for path in sorted(Path(model_dir).glob("*.safetensors"))
             for entry in safetensors_header(path)[0].values()}
    return {STORED_DTYPES[k] for k in kinds} if kinds and kinds <= set(STORED_DTYPES) else None


def needs_streamed_cast(model_dir: Path, dtype: torch.dtype) -> bool:
    """True when the folder's safetensors hold only floating tensors of another dtype."""
    stored = stored_float_dtypes(model_dir)
    return stored is not None and stored != {dtype}


def _mapped_view(file_map: torch.Tensor, offset: int, entry: dict) -> torch.Tensor | None:
    """The stored tensor at `offset` of a mapped file as a view, or None where its bytes do not
    start on a multiple of its element size (a view cannot start there)."""
    stored = STORED_DTYPES[entry["dtype"]]
    start, end = entry["data_offsets"]
    if offset % stored.itemsize:
        return None
    return file_map[offset:offset + end - start].view(stored).reshape(entry["shape"])


def read_cast(model_dir: Path, dtype: torch.dtype, keep: Callable[[str], bool] | None = None,
              mapped: Callable[[str], bool] | None = None):
    """Every tensor of the folder's safetensors (or those whose names `keep` accepts), cast to
    `dtype` as it is read: (name, tensor).

    mapped: names whose tensors, when stored in `dtype`, come as views of a private memory map of
    their file instead of being read, so only the pages a run touches are ever in memory. Meant for
    embedding tables: a run looks up a few thousand of their rows (the default target's table is
    445 MiB in bfloat16, of which a GSM8K run reads a few MiB)."""
    for path in sorted(Path(model_dir).glob("*.safetensors")):
        header, data_start = safetensors_header(path)
        file_map = None
        with path.open("rb") as handle:
            for name, entry in header.items():
                if keep is not None and not keep(name):
                    continue
                start, end = entry["data_offsets"]
                if mapped is not None and mapped(name) and STORED_DTYPES[entry["dtype"]] == dtype:
                    if file_map is None:
                        file_map = torch.from_file(str(path), shared=False, size=path.stat().st_size, dtype=torch.uint8)
                    view = _mapped_view(file_map, data_start + start, entry)
                    if view is not None:
                        yield name, view
                        continue
                handle.seek(data_start + start)
                raw = torch.empty(end - start, dtype=torch.uint8)
                handle.readinto(memoryview(raw.numpy()))
                yield name, raw.view(STORED_DTYPES[entry["dtype"]]).reshape(entry["shape"]).to(dtype)


def embedding_names(model: torch.nn.Module) -> set[str]:
    """The saved names of the model's embedding tables' weights (e.g. "model.embed_tokens.weight")."""
    return {f"{name}.weight" for name, module in model.named_modules() if isinstance(module, torch.nn.Embedding)}


def _assign(model: torch.nn.Module, name: str, tensor: torch.Tensor) -> str | None:
    """Put one stored tensor in the empty model's place for it; the owning module's name, or None
    for a name the model does not have (skipped, as a non-strict load_state_dict skips it)."""
    owner_name, _, leaf = name.rpartition(".")
    try:
        owner = model.get_submodule(owner_name)
    except AttributeError:
        return None
    if leaf in owner._parameters:
        owner._parameters[leaf] = torch.nn.Parameter(tensor, requires_grad=False)
    elif leaf in owner._buffers:
        owner._buffers[leaf] = tensor
    else:
        return None
    return owner_name


def load_streamed(model_dir: str, dtype: torch.dtype, attn: str | None = None, pack: bool = False, int8: bool = False):
    """The model of `model_dir` in `dtype`, built without weights and filled tensor by tensor.

    pack: reorder each linear layer for oneDNN (runtime.packed_linear) as soon as its tensors are
    read, so the plain copy is freed before the next is read: packing a fully loaded model instead
    left the freed plain weights resident (measured on the 1.5B target in bfloat16: 6.2 GiB
    resident after packing, against 3.8 GiB this way).
    int8: make each linear layer int8 as its tensors arrive (runtime.int8_linear), those that stay
    16-bit packed where `pack` says so."""
    from accelerate import init_empty_weights
    from transformers import AutoConfig, AutoModelForCausalLM, GenerationConfig

    from seed_tot.runtime.int8_linear import quantize_if_loaded
    from seed_tot.runtime.packed_linear import pack_if_loaded, return_freed_memory

    config = AutoConfig.from_pretrained(model_dir)
    kwargs = {"attn_implementation": attn} if attn else {}
    with init_empty_weights():
        model = AutoModelForCausalLM.from_config(config, dtype=dtype, **kwargs)
    for name, tensor in read_cast(Path(model_dir), dtype, mapped=embedding_names(model).__contains__):
        owner_name = _assign(model, name, tensor)
        del tensor
        if owner_name is None:
            continue
        if (int8 and quantize_if_loaded(model, owner_name)) or (pack and pack_if_loaded(model, owner_name)):
            return_freed_memory()  # the plain copy just freed, before the next read lands beside it
    model.tie_weights()
    empty = [name for name, tensor in [*model.named_parameters(), *model.named_buffers()] if tensor.is_meta]
    if empty:
        raise ValueError(f"{model_dir} holds no weights for {', '.join(empty[:3])}")
    if (Path(model_dir) / "generation_config.json").is_file():
        model.generation_config = GenerationConfig.from_pretrained(model_dir)
    return model.eval()
