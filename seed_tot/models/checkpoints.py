"""Trained weights for a base model, as safetensors: full weights or a LoRA adapter (peft's format).

A checkpoint is a directory with `checkpoint.json` (what was trained, on which base model) and
either `model.safetensors` (every weight) or `adapter_model.safetensors` + `adapter_config.json`
(written by peft). Applying one needs no peft: a LoRA adapter is merged as W += (alpha / r) B A.
Names without a path resolve under the checkpoint cache (<cache>/checkpoints/<name>).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import torch
from safetensors.torch import load_file, load_model, save_model

from seed_tot.errors import ConfigError
from seed_tot.models.registry import cache_root

META_FILE = "checkpoint.json"
FULL_FILE = "model.safetensors"
ADAPTER_FILE = "adapter_model.safetensors"
ADAPTER_CONFIG = "adapter_config.json"


def checkpoints_root() -> Path:
    return cache_root().parent / "checkpoints"


def resolve_checkpoint(name_or_path: str) -> Path:
    """A checkpoint directory given as a path, or as a name under checkpoints_root()."""
    for candidate in (Path(name_or_path).expanduser(), checkpoints_root() / name_or_path):
        if (candidate / META_FILE).is_file():
            return candidate
    raise ConfigError(
        f"No checkpoint {name_or_path!r}: give a directory holding {META_FILE} or a name under "
        f"{checkpoints_root()} (made by `seed-tot train ...`)."
    )


def read_meta(path: Path) -> dict:
    return json.loads((path / META_FILE).read_text())


def save_full(model: torch.nn.Module, path: Path, meta: dict) -> None:
    path.mkdir(parents=True, exist_ok=True)
    save_model(model, str(path / FULL_FILE))  # handles tied weights (embeddings = LM head)
    _write_meta(path, meta | {"kind": "full"})


def save_lora(peft_model, path: Path, meta: dict) -> None:
    path.mkdir(parents=True, exist_ok=True)
    peft_model.save_pretrained(str(path), safe_serialization=True)
    _write_meta(path, meta | {"kind": "lora"})


def _write_meta(path: Path, meta: dict) -> None:
    tmp = path / (META_FILE + ".tmp")
    tmp.write_text(json.dumps(meta, indent=1, sort_keys=True) + "\n")
    tmp.replace(path / META_FILE)


def apply_checkpoint(model: torch.nn.Module, path: Path) -> dict:
    """Load the checkpoint's weights into `model` in place (a plain, unpacked model); its metadata."""
    meta = read_meta(path)
    try:
        if meta["kind"] == "full":
            load_model(model, str(path / FULL_FILE), strict=True, device=str(model.device))
        else:
            merge_lora(model, path)
    except (RuntimeError, KeyError, ValueError) as exc:
        raise ConfigError(
            f"Checkpoint {path} does not fit this model (trained on {meta.get('base_model')!r}): "
            f"{str(exc).splitlines()[0][:200]}"
        ) from exc
    return meta


_LORA_KEY = re.compile(r"^(?:base_model\.model\.)?(?P<module>.+)\.lora_(?P<part>[AB])\.weight$")


def merge_lora(model: torch.nn.Module, path: Path) -> int:
    """Add a peft LoRA adapter's product into the base linear weights; how many were changed."""
    config = json.loads((path / ADAPTER_CONFIG).read_text())
    scale = float(config["lora_alpha"]) / float(config["r"])
    pairs: dict[str, dict[str, torch.Tensor]] = {}
    for key, tensor in load_file(str(path / ADAPTER_FILE)).items():
        match = _LORA_KEY.match(key)
        if match is None:
            raise ValueError(f"unexpected adapter tensor {key}")
        pairs.setdefault(match["module"], {})[match["part"]] = tensor
    modules = dict(model.named_modules())
    with torch.no_grad():
        for name, parts in pairs.items():
            layer = modules[name]
            if not isinstance(layer, torch.nn.Linear):
                raise ValueError(f"{name} is a {type(layer).__name__}, not a plain Linear (packed weights?)")
            delta = (parts["B"].float() @ parts["A"].float()) * scale
            layer.weight += delta.to(device=layer.weight.device, dtype=layer.weight.dtype)
    return len(pairs)
