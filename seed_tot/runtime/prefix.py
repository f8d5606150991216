"""Prefix tuning on a frozen model: learnable key/values per layer in front of the KV cache,
input embeddings instead of token ids, and final hidden states with the LM head applied only
to the rows that need logits.

Layout: a prefixed cache holds the prefix's P positions first, then the sequence's. Which rows
see the prefix is decided by the 4-D mask (seed_tot.runtime.masks.prefixed_tree_mask), so rows
that must stay the frozen model's own computation simply never attend to it.
"""

from __future__ import annotations

import torch
from transformers import DynamicCache, PreTrainedModel

from seed_tot.runtime.cache import empty_cache

# Per layer (keys, values), each (1, kv_heads, positions, head_dim).
LayerKV = list[tuple[torch.Tensor, torch.Tensor]]


def prefixed_cache(prefix: LayerKV, cache: DynamicCache | None = None) -> DynamicCache:
    """A new cache holding the prefix's positions, then those of `cache` (if given). The prefix
    tensors may require grad: the cache is built with differentiable concatenation."""
    joined = empty_cache()
    for layer_idx, (keys, values) in enumerate(prefix):
        if cache is not None and cache.layers[layer_idx].is_initialized:
            layer = cache.layers[layer_idx]
            keys = torch.cat([keys.to(layer.keys.dtype), layer.keys], dim=-2)
            values = torch.cat([values.to(layer.values.dtype), layer.values], dim=-2)
        joined.update(keys, values, layer_idx)
    return joined


def cache_kv(cache: DynamicCache) -> LayerKV:
    """The (keys, values) tensors of every layer of a cache."""
    return [(layer.keys, layer.values) for layer in cache.layers if layer.is_initialized]


def embed_tokens(model: PreTrainedModel, input_ids: torch.Tensor) -> torch.Tensor:
    """The model's input embeddings of `input_ids` (B, q) -> (B, q, hidden)."""
    return model.get_input_embeddings()(input_ids.to(model.device))


def decoder_hidden(
    model: PreTrainedModel,
    inputs_embeds: torch.Tensor,
    cache: DynamicCache,
    position_ids: torch.Tensor,
    attention_mask: torch.Tensor,
) -> torch.Tensor:
    """Final (normed) hidden states (B, q, hidden) of the decoder stack over `inputs_embeds`,
    appending to `cache`. Gradients flow when the caller has them enabled (training)."""
    out = model.get_decoder()(
        inputs_embeds=inputs_embeds.to(model.dtype),
        past_key_values=cache,
        use_cache=True,
        position_ids=position_ids.to(model.device),
        attention_mask=attention_mask.to(device=model.device, dtype=model.dtype),
    )
    return out.last_hidden_state


def lm_logits(model: PreTrainedModel, hidden: torch.Tensor) -> torch.Tensor:
    """float32 logits of final hidden states (the causal LM head, soft-capped where the model is)."""
    logits = model.get_output_embeddings()(hidden).float()
    cap = getattr(model.config, "final_logit_softcapping", None)
    if cap:
        logits = torch.tanh(logits / cap) * cap
    return logits


@torch.no_grad()
def sequence_cache(model: PreTrainedModel, token_ids: list[int]) -> DynamicCache:
    """The frozen model's KV cache of a token sequence (plain causal attention, no prefix), made
    outside inference mode so that a prefixed cache built on it can take part in autograd."""
    cache = empty_cache()
    ids = torch.tensor([token_ids], dtype=torch.long, device=model.device)
    model.get_decoder()(input_ids=ids, past_key_values=cache, use_cache=True,
                        position_ids=torch.arange(len(token_ids), device=model.device).unsqueeze(0))
    return cache
