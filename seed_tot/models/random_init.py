"""Random-weight models of a real model's shape, built from its config.json (no weights needed).

For timings of real shapes where the weights cannot travel (a GPU machine without the model
cache): the arithmetic per token is the real model's, the outputs are noise.
"""

from __future__ import annotations

import torch
from transformers import AutoConfig, AutoModelForCausalLM, PreTrainedModel


def random_model(config_path: str, dtype: torch.dtype, device: str = "cpu", seed: int = 0) -> PreTrainedModel:
    """The model of `config_path` (a config.json or its folder) with seeded random weights, built
    directly on `device` so a 1.5B model needs no CPU copy."""
    config = AutoConfig.from_pretrained(config_path)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        if device.startswith("cuda"):
            torch.cuda.manual_seed_all(seed)
        with torch.device(device):
            model = AutoModelForCausalLM.from_config(config, dtype=dtype)
    return model.eval()
