"""ModelRunner: one causal LM behind the few operations the decoders need."""

from __future__ import annotations

import torch
from transformers import DynamicCache, PreTrainedModel

from seed_tot.errors import NumericOverflowError
from seed_tot.runtime.cache import cache_length, empty_cache
from seed_tot.runtime.packed_linear import PackedLinear
from seed_tot.runtime.prefix import decoder_hidden, embed_tokens, lm_logits
from seed_tot.runtime.subnormals import flush_subnormals


def _eos_ids(model: PreTrainedModel, tokenizer) -> frozenset[int]:
    ids: set[int] = set()
    for source in (getattr(model, "generation_config", None), model.config):
        value = getattr(source, "eos_token_id", None) if source is not None else None
        if isinstance(value, int):
            ids.add(value)
        elif isinstance(value, (list, tuple)):
            ids.update(int(v) for v in value)
    if tokenizer is not None and tokenizer.eos_token_id is not None:
        ids.add(int(tokenizer.eos_token_id))
    return frozenset(ids)


def refuse_overflow(logits: torch.Tensor, name: str) -> None:
    """float16 tops out at 65,504; an activation past it becomes inf and then NaN logits. Raise
    instead of sampling from them. The float32 sum of finite float16 values stays finite and one
    inf or NaN makes it non-finite, far cheaper than isfinite().all() on a wide step
    (measured: docs/models.md#float16-on-a-cpu-with-avx-512-fp16)."""
    if not bool(torch.isfinite(logits.float().sum())):
        raise NumericOverflowError(
            f"Model {name!r} overflowed float16 (its logits are not finite): rerun with --dtype bfloat16 "
            "or --dtype float32 (with --resume, finished problems are kept)."
        )


class ModelRunner:
    """Forward passes over a KV cache, with optional custom 4-D masks and positions."""

    def __init__(self, model: PreTrainedModel, tokenizer=None, name: str = "model"):
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.name = name
        self.eos_token_ids = _eos_ids(model, tokenizer)
        self.forward_count = 0
        self.token_slots = 0  # token positions computed by all forwards, pads included
        self.pad_slots = 0  # of which pads (counted by the ragged batches that add them)
        self.flushes_subnormals = self.device.type == "cpu" and flush_subnormals()

    @property
    def device(self) -> torch.device:
        return self.model.device

    @property
    def dtype(self) -> torch.dtype:
        return self.model.dtype

    @property
    def vocab_size(self) -> int:
        return int(self.model.get_output_embeddings().out_features)

    @property
    def packed_layers(self) -> int:
        """How many linear layers hold pre-reordered weights (seed_tot.runtime.packed_linear)."""
        return sum(isinstance(module, PackedLinear) for module in self.model.modules())

    @property
    def int8_layers(self) -> int:
        """How many linear layers hold int8 weights (seed_tot.runtime.int8_linear)."""
        from seed_tot.runtime.int8_linear import int8_layer_count

        return int8_layer_count(self.model)

    @property
    def pad_token_id(self) -> int:
        tok = self.tokenizer
        if tok is not None and tok.pad_token_id is not None:
            return int(tok.pad_token_id)
        return min(self.eos_token_ids) if self.eos_token_ids else 0

    def new_cache(self) -> DynamicCache:
        return empty_cache()

    @torch.inference_mode()
    def forward(
        self,
        input_ids: torch.Tensor,
        cache: DynamicCache | None = None,
        position_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        logits_to_keep: int | torch.Tensor = 0,
    ) -> torch.Tensor:
        """Run the model on `input_ids` (B, q), appending to `cache`; return float32 logits (B, q, V).

        `attention_mask` is either 2-D (B, past + q; 1 = real token, 0 = pad) or an additive
        4-D float mask (B, 1, q, past + q) from seed_tot.runtime.masks. With a 4-D mask,
        pass explicit `position_ids`. `logits_to_keep` > 0 computes logits for only the last
        that many positions (a prompt prefill needs one; the LM head over a long prompt is costly);
        a (B, n) long tensor computes them at those positions of each row.
        """
        if input_ids.dim() == 1:
            input_ids = input_ids.unsqueeze(0)
        past = cache_length(cache) if cache is not None else 0
        kwargs = {"input_ids": input_ids.to(self.device), "past_key_values": cache, "use_cache": cache is not None}
        if position_ids is None and attention_mask is None:
            q = input_ids.shape[1]
            position_ids = torch.arange(past, past + q, dtype=torch.long).unsqueeze(0).expand(input_ids.shape[0], -1)
        if position_ids is not None:
            kwargs["position_ids"] = position_ids.to(self.device)
        if attention_mask is not None:
            if attention_mask.dim() == 4:
                attention_mask = attention_mask.to(dtype=self.dtype)
            kwargs["attention_mask"] = attention_mask.to(self.device)
        if isinstance(logits_to_keep, torch.Tensor):  # (B, n) positions per row
            kwargs["logits_to_keep"] = logits_to_keep.to(self.device)
        elif logits_to_keep > 0:
            kwargs["logits_to_keep"] = logits_to_keep
        out = self.model(**kwargs)
        self.forward_count += 1
        self.token_slots += input_ids.numel()
        logits = out.logits.float()
        if self.dtype == torch.float16:
            refuse_overflow(logits, self.name)
        return logits

    @torch.inference_mode()
    def embed(self, input_ids: torch.Tensor) -> torch.Tensor:
        """Input embeddings (B, q, hidden) of token ids (B, q)."""
        return embed_tokens(self.model, input_ids)

    @torch.inference_mode()
    def hidden(
        self, inputs_embeds: torch.Tensor, cache: DynamicCache, position_ids: torch.Tensor, attention_mask: torch.Tensor
    ) -> torch.Tensor:
        """One forward over input embeddings with a 4-D mask and explicit positions, appending to
        `cache`; returns the final hidden states (B, q, hidden), for `logits` on the rows needed."""
        hidden = decoder_hidden(self.model, inputs_embeds, cache, position_ids, attention_mask)
        self.forward_count += 1
        self.token_slots += inputs_embeds.shape[0] * inputs_embeds.shape[1]
        return hidden

    @torch.inference_mode()
    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """float32 logits of final hidden states (the LM head over those rows only)."""
        logits = lm_logits(self.model, hidden)
        if self.dtype == torch.float16:
            refuse_overflow(logits, self.name)
        return logits

    def prefill(self, token_ids: list[int], cache: DynamicCache | None = None) -> tuple[torch.Tensor, DynamicCache]:
        """Feed a prompt (or a continuation) into a cache; return the last position's logits (V,)."""
        cache = cache if cache is not None else self.new_cache()
        logits = self.forward(torch.tensor([token_ids], dtype=torch.long), cache, logits_to_keep=1)
        return logits[0, -1], cache

    def decode(self, token_ids: list[int]) -> str:
        if self.tokenizer is None:
            return " ".join(str(t) for t in token_ids)
        return self.tokenizer.decode(token_ids, skip_special_tokens=True)

    def encode(self, text: str) -> list[int]:
        if self.tokenizer is None:
            raise ValueError(f"model {self.name!r} has no tokenizer")
        return list(self.tokenizer.encode(text, add_special_tokens=False))
