"""A target for reading only: the layers a learned judge reads, and nothing above them.

When an engine (llama.cpp, vLLM, SGLang) holds the model that decodes, a judge on layer L still
reads the target's hidden states in this process, but it needs only the input embeddings and
decoder layers 1..L. The model is built without weights; the embeddings and every
one-dimensional weight (norms, biases: the weights' fingerprint reads them) are read first, then
the layers up to L once the judge's head says which L; everything above stays empty (on the meta
device), since the judge's forward stops at L. For the default 1.5B target and a layer-14 judge
that is 0.89 B of its 1.78 B values.
"""

from __future__ import annotations

from pathlib import Path

import torch

from seed_tot.models.streamed_cast import read_cast
from seed_tot.runtime.hidden import decoder_layers


def _decoder_layers_prefix(model) -> tuple[str, int]:
    """(qualified name of the decoder's layer list, its length): e.g. ("model.layers", 28)."""
    layers = decoder_layers(model)
    name = next(name for name, module in model.named_modules() if module is layers)
    return name, len(layers)


def _embedding_names(model) -> set[str]:
    embeddings = model.get_input_embeddings()
    return {f"{name}.weight" for name, module in model.named_modules() if module is embeddings}


def _fill(model, model_dir: Path, dtype: torch.dtype, wanted, mapped=None) -> None:
    """Assign the saved tensors whose names `wanted` accepts (those `mapped` accepts mapped from
    the file where stored in `dtype`: read_cast)."""
    model.load_state_dict(dict(read_cast(model_dir, dtype, keep=wanted, mapped=mapped)), strict=False, assign=True)


def skeleton_for_reading(model_dir: str | Path, dtype: torch.dtype):
    """The saved model built without weights, holding only its input embeddings and its
    one-dimensional weights: enough for its weights' fingerprint. An embedding table stored in
    `dtype` stays mapped from the file (only the rows read come into memory)."""
    from accelerate import init_empty_weights
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.from_pretrained(model_dir)
    with init_empty_weights():
        model = AutoModelForCausalLM.from_config(config, dtype=dtype)
    shapes = {name: parameter.dim() for name, parameter in model.named_parameters()}
    embeddings = _embedding_names(model)
    _fill(model, Path(model_dir), dtype, lambda name: name in embeddings or shapes.get(name) == 1,
          mapped=embeddings.__contains__)
    return model.eval()


def fill_layers(model, model_dir: str | Path, dtype: torch.dtype, deepest: int) -> None:
    """Read decoder layers 1..`deepest` into a skeleton; the layers above stay empty."""
    prefix, count = _decoder_layers_prefix(model)
    if not 1 <= deepest <= count:
        raise ValueError(f"layer {deepest} is outside 1..{count}")
    starts = tuple(f"{prefix}.{i}." for i in range(deepest))
    _fill(model, Path(model_dir), dtype, lambda name: name.startswith(starts))


def move_loaded(model, device: torch.device) -> None:
    """Move every weight and buffer that holds data to `device` (the empty ones cannot move)."""
    for module in model.modules():
        for name, parameter in list(module._parameters.items()):
            if parameter is not None and not parameter.is_meta and parameter.device != device:
                module._parameters[name] = torch.nn.Parameter(parameter.to(device), requires_grad=False)
        for name, buffer in list(module._buffers.items()):
            if buffer is not None and not buffer.is_meta and buffer.device != device:
                module._buffers[name] = buffer.to(device)


def _weights(model) -> list[torch.Tensor]:
    """Parameters and buffers: a linear layer packed for oneDNN keeps its weight as a buffer."""
    return list(model.parameters()) + list(model.buffers())


def loaded_values(model) -> int:
    """How many weight values the model holds in memory (the empty ones not counted)."""
    return sum(t.numel() for t in _weights(model) if not t.is_meta)


def all_values(model) -> int:
    """How many weight values the model has, loaded or empty."""
    return sum(t.numel() for t in _weights(model))
