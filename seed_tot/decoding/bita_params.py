"""BiTA's learnable parameters: prompt tokens (a prefix of key/values per layer, as in prefix
tuning) and mask-token embeddings; the frozen model's own weights are never changed.

Saved as one safetensors file (float32 tensors `prefix_keys`, `prefix_values`: (layers, kv_heads,
prefix, head_dim), `mask_embeddings`: (masks, hidden)) whose metadata names the model geometry it
fits, so a checkpoint meant for another model is refused in one sentence.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from torch import nn

from seed_tot.errors import ConfigError
from seed_tot.runtime import ModelRunner, cache_length
from seed_tot.runtime.prefix import LayerKV, cache_kv

FORMAT = "seed-tot-bita-1"
DEFAULT_PREFIX = 16  # prompt tokens, the paper's setting
DEFAULT_MASKS = 3  # mask tokens (future tokens drafted per forward), the paper's setting
INIT_TEXT = " The answer follows step by step, with each number computed and stated."


def model_geometry(runner: ModelRunner) -> dict[str, int]:
    """Layers, KV heads, head size and hidden size of a model, read from one real forward."""
    cache = runner.new_cache()
    runner.forward(torch.tensor([[0]]), cache)
    kv = cache_kv(cache)
    _, heads, _, head_dim = kv[0][0].shape
    hidden = int(runner.model.get_input_embeddings().weight.shape[1])
    return {"layers": len(kv), "kv_heads": int(heads), "head_dim": int(head_dim), "hidden": hidden}


class BitaPrompt(nn.Module):
    """Prompt (prefix) key/values and mask embeddings, float32; cast to the model dtype on use."""

    def __init__(self, prefix_keys: torch.Tensor, prefix_values: torch.Tensor, mask_embeddings: torch.Tensor,
                 meta: dict | None = None):
        super().__init__()
        self.prefix_keys = nn.Parameter(prefix_keys.detach().float().clone())
        self.prefix_values = nn.Parameter(prefix_values.detach().float().clone())
        self.mask_embeddings = nn.Parameter(mask_embeddings.detach().float().clone())
        self.meta = dict(meta or {})

    @property
    def prefix_len(self) -> int:
        return int(self.prefix_keys.shape[2])

    @property
    def masks(self) -> int:
        return int(self.mask_embeddings.shape[0])

    def geometry(self) -> dict[str, int]:
        layers, heads, _, head_dim = self.prefix_keys.shape
        return {"layers": int(layers), "kv_heads": int(heads), "head_dim": int(head_dim),
                "hidden": int(self.mask_embeddings.shape[1])}

    def layer_kv(self, dtype: torch.dtype, device: torch.device | str = "cpu") -> LayerKV:
        """The prefix as per-layer (keys, values) of batch 1, differentiable when grad is on."""
        keys = self.prefix_keys.to(device=device, dtype=dtype)
        values = self.prefix_values.to(device=device, dtype=dtype)
        return [(keys[i].unsqueeze(0), values[i].unsqueeze(0)) for i in range(keys.shape[0])]

    def check_fits(self, runner: ModelRunner) -> None:
        theirs, mine = model_geometry(runner), self.geometry()
        if theirs != mine:
            raise ConfigError(
                f"This BiTA checkpoint was trained for a model with {mine} but {runner.name!r} has {theirs}: "
                "train one for this model with `seed-tot train bita --model ...`."
            )


def init_prompt(
    runner: ModelRunner, prefix_len: int = DEFAULT_PREFIX, masks: int = DEFAULT_MASKS, seed: int = 0,
    how: str = "tokens",
) -> BitaPrompt:
    """Fresh BiTA parameters for `runner`'s model.

    how="tokens": the prefix is the model's own key/values of `prefix_len` tokens of a neutral
    text (prefix tuning's initialisation from real activations), each mask embedding the mean
    token embedding plus small seeded noise. how="random": seeded Gaussian noise at the scale
    of those tensors (used by tests: decoding must stay exact whatever the parameters are).
    """
    if prefix_len < 1 or masks < 1:
        raise ConfigError(f"BiTA needs at least one prompt token and one mask token (got {prefix_len}, {masks}).")
    generator = torch.Generator().manual_seed(seed)
    embeddings = runner.model.get_input_embeddings().weight.detach().float()
    mean, scale = embeddings.mean(0), embeddings.std()
    mask_embeddings = mean + 0.1 * scale * torch.randn(masks, embeddings.shape[1], generator=generator)
    keys, values = _token_kv(runner, prefix_len)
    if how == "random":
        keys = torch.randn(keys.shape, generator=generator) * keys.std()
        values = torch.randn(values.shape, generator=generator) * values.std()
        mask_embeddings = torch.randn(mask_embeddings.shape, generator=generator) * scale
    elif how != "tokens":
        raise ConfigError(f"Unknown BiTA initialisation {how!r}: use tokens or random.")
    meta = {"model": runner.name, "init": how, "seed": seed}
    return BitaPrompt(keys, values, mask_embeddings, meta)


def _token_kv(runner: ModelRunner, length: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(layers, kv_heads, length, head_dim) keys and values of `length` tokens of INIT_TEXT."""
    ids = runner.encode(INIT_TEXT) if runner.tokenizer is not None else list(range(1, length + 1))
    ids = (ids * (length // max(1, len(ids)) + 1))[:length]
    cache = runner.new_cache()
    runner.forward(torch.tensor([ids]), cache)
    assert cache_length(cache) == length
    kv = cache_kv(cache)
    keys = torch.stack([k[0] for k, _ in kv]).float().clone()
    values = torch.stack([v[0] for _, v in kv]).float().clone()
    return keys, values


def save_prompt(prompt: BitaPrompt, path: str | Path, extra: dict | None = None) -> Path:
    """Write the parameters atomically (temp file, then rename) as safetensors."""
    from safetensors.torch import save_file

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    meta = {"format": FORMAT, **{k: str(v) for k, v in prompt.meta.items()},
            **{k: str(v) for k, v in (extra or {}).items()}, "geometry": json.dumps(prompt.geometry())}
    tensors = {name: p.detach().float().contiguous() for name, p in
               (("prefix_keys", prompt.prefix_keys), ("prefix_values", prompt.prefix_values),
                ("mask_embeddings", prompt.mask_embeddings))}
    temp = path.with_name(path.name + ".tmp")
    save_file(tensors, str(temp), metadata=meta)
    temp.replace(path)
    return path


def load_prompt(path: str | Path) -> BitaPrompt:
    """Read parameters written by save_prompt; one sentence if the file is not such a checkpoint."""
    from safetensors import safe_open

    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"BiTA checkpoint {path} does not exist: train one with `seed-tot train bita`.")
    try:
        with safe_open(str(path), framework="pt") as handle:
            meta = handle.metadata() or {}
            tensors = {name: handle.get_tensor(name) for name in handle.keys()}
    except Exception as exc:  # safetensors raises its own error types for a damaged file
        raise ConfigError(f"Cannot read BiTA checkpoint {path} ({type(exc).__name__}): pass a file "
                          "written by `seed-tot train bita`.") from None
    needed = {"prefix_keys", "prefix_values", "mask_embeddings"}
    if meta.get("format") != FORMAT or not needed <= set(tensors):
        raise ConfigError(f"{path} is not a BiTA checkpoint of this version: pass a file written by `seed-tot train bita`.")
    kept = {k: v for k, v in meta.items() if k not in ("format", "geometry")}
    return BitaPrompt(tensors["prefix_keys"], tensors["prefix_values"], tensors["mask_embeddings"], kept)
