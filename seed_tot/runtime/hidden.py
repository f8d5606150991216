"""Hidden states of a decoder's inner layers, read without running the layers above them.

A learned judge reads the residual stream after decoder layer L (1-based: the output of the L-th
block, before any final norm). The forward stops there: forward hooks record the wanted layers
and the deepest one raises a private exception that ends the pass, so a judge on layer 14 of 28
costs half a forward. Hooks are registered on this model instance only and always removed.
"""

from __future__ import annotations

import torch
from transformers import DynamicCache, PreTrainedModel

from seed_tot.errors import ConfigError
from seed_tot.runtime.cache import cache_length, empty_cache, repeat_rows


class _Reached(Exception):
    """Raised by the hook of the deepest wanted layer: nothing above it needs to run."""


def decoder_layer_count(model: PreTrainedModel) -> int:
    return len(decoder_layers(model))


def decoder_layers(model: PreTrainedModel) -> torch.nn.ModuleList:
    layers = getattr(model.get_decoder(), "layers", None)
    if not isinstance(layers, torch.nn.ModuleList):
        raise ConfigError(
            f"{type(model).__name__} keeps no list of decoder layers (model.get_decoder().layers), so a "
            "learned judge cannot read its hidden states: use --value-mode logits or samples."
        )
    return layers


@torch.inference_mode()
def layer_states(
    model: PreTrainedModel, input_ids: torch.Tensor, attention_mask: torch.Tensor, layers: tuple[int, ...],
    past: DynamicCache | None = None,
) -> dict[int, torch.Tensor]:
    """{L: float32 hidden states (B, q, hidden) after decoder layer L} for right-padded `input_ids`
    (B, q) with a 2-D `attention_mask` (1 = token, 0 = pad). Positions count from 0 in every row, or
    from the length of `past`, a cache every row continues (e.g. a shared prompt's, from
    `prompt_cache`); its positions are all real tokens. `past` is extended in place."""
    blocks = decoder_layers(model)
    if not layers or min(layers) < 1 or max(layers) > len(blocks):
        raise ConfigError(f"Judge layers {layers} are outside 1..{len(blocks)} for this model: pick layers it has.")
    deepest = max(layers)
    found: dict[int, torch.Tensor] = {}

    def recorder(layer: int):
        def hook(_module, _inputs, output):
            hidden = output[0] if isinstance(output, tuple) else output
            found[layer] = hidden.float()
            if layer == deepest:
                raise _Reached

        return hook

    handles = [blocks[layer - 1].register_forward_hook(recorder(layer)) for layer in set(layers)]
    start = cache_length(past) if past is not None else 0
    positions = torch.arange(start, start + input_ids.shape[1], device=model.device).unsqueeze(0)
    if start:
        attention_mask = torch.cat([torch.ones(input_ids.shape[0], start, dtype=attention_mask.dtype), attention_mask], 1)
    try:
        model.get_decoder()(
            input_ids=input_ids.to(model.device),
            attention_mask=attention_mask.to(model.device),
            position_ids=positions.expand(input_ids.shape[0], -1),
            past_key_values=past,
            use_cache=past is not None,
        )
    except _Reached:
        pass
    finally:
        for handle in handles:
            handle.remove()
    return found


@torch.inference_mode()
def prompt_cache(model: PreTrainedModel, prompt_ids: list[int], deepest: int) -> DynamicCache:
    """The KV cache of one prompt up to decoder layer `deepest` (the layers above never run)."""
    cache = empty_cache()
    layer_states(model, torch.tensor([prompt_ids]), torch.ones(1, len(prompt_ids), dtype=torch.long), (deepest,), cache)
    return cache


def shared_prefix(cache: DynamicCache, rows: int) -> DynamicCache:
    """A cache of `rows` rows that each start with the one-row `cache` (which stays unchanged)."""
    return repeat_rows(cache, rows)
