"""A random value head for a loaded (tiny) target: what the learned-judge tests rate states with."""

from __future__ import annotations

from pathlib import Path

import torch

from seed_tot.models.fingerprint import weights_fingerprint
from seed_tot.values.features import FEATURE_RULE
from seed_tot.values.head import ValueHead


def tiny_value_head(target, path: Path) -> Path:
    hidden = target.model.config.hidden_size
    weight = torch.randn(hidden, generator=torch.Generator().manual_seed(0)) * 0.05
    ValueHead(layer=1, mean=torch.zeros(hidden), scale=torch.ones(hidden), weight=weight, bias=0.0,
              meta={"target": target.name, "target_fingerprint": weights_fingerprint(target.model),
                    "head_id": "tiny-head", "feature_rule": FEATURE_RULE,
                    "dtype": str(target.dtype).removeprefix("torch."), "layers": [1], "scope": "all", "l2": 0.1,
                    "train_problem_ids": ["gsm8k-train-1"]}).save(path)
    return path
