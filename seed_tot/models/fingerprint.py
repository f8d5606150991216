"""A short identity of a loaded model's weights: artefacts trained on one target (a learned judge)
refuse another. Computed from the architecture sizes and a bfloat16 copy of a slice of the input
embeddings and of every one-dimensional decoder weight (norms, biases: never repacked), so the same weights loaded in float32, bfloat16 or
from GGUF give the same identity, and a fine-tuned or other model does not."""

from __future__ import annotations

import hashlib

import torch
from transformers import PreTrainedModel

ROWS = 256


@torch.inference_mode()
def weights_fingerprint(model: PreTrainedModel) -> str:
    config = model.config
    digest = hashlib.sha256()
    sizes = (config.model_type, config.vocab_size, config.hidden_size, config.num_hidden_layers)
    digest.update(repr(sizes).encode())
    embeddings = model.get_input_embeddings().weight
    digest.update(_bf16_bytes(embeddings[:ROWS]))
    for name, parameter in model.get_decoder().named_parameters():
        if parameter.dim() == 1:
            digest.update(name.encode())
            digest.update(_bf16_bytes(parameter))
    return digest.hexdigest()[:16]


def _bf16_bytes(tensor: torch.Tensor) -> bytes:
    return tensor.detach().to(torch.bfloat16).view(torch.int16).cpu().numpy().tobytes()
