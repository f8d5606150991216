"""A short identity of a loaded model's weights: artefacts trained on one target (a learned judge)
refuse another. Computed from the architecture sizes and a bfloat16 copy of a slice of the input
embeddings and of every one-dimensional decoder weight (norms, biases: never repacked), so the same weights loaded in float32, bfloat16 or
from GGUF give the same identity, and a fine-tuned or other model does not."""

from __future__ import annotations

import hashlib

import torch
from transformers import PreTrainedModel

from seed_tot.runtime.packed_linear import PackedLinear

ROWS = 256


@torch.inference_mode()
def weights_fingerprint(model: PreTrainedModel) -> str:
    config = model.config
    digest = hashlib.sha256()
    sizes = (config.model_type, config.vocab_size, config.hidden_size, config.num_hidden_layers)
    digest.update(repr(sizes).encode())
    embeddings = model.get_input_embeddings().weight
    digest.update(_bf16_bytes(embeddings[:ROWS]))
    for name, parameter in _one_dimensional_weights(model.get_decoder()):
        digest.update(name.encode())
        digest.update(_bf16_bytes(parameter))
    return digest.hexdigest()[:16]


def _one_dimensional_weights(decoder):
    """(name, tensor) of every one-dimensional weight, in named_parameters() order. A linear layer
    packed for oneDNN (bfloat16 CPUs) holds its bias as a buffer: it counts where the plain layer's
    bias parameter would, so a packed model has its plain model's identity."""
    for module_name, module in decoder.named_modules():
        own = dict(module.named_parameters(recurse=False))
        if isinstance(module, PackedLinear) and module.bias is not None:
            own["bias"] = module.bias
        for name, tensor in own.items():
            if tensor.dim() == 1:
                yield (f"{module_name}.{name}" if module_name else name), tensor


def _bf16_bytes(tensor: torch.Tensor) -> bytes:
    return tensor.detach().to(torch.bfloat16).view(torch.int16).cpu().numpy().tobytes()
