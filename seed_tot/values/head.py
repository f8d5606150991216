"""The learned judge's head: standardised hidden-state features -> P(the state reaches a correct
answer), a logistic regression fit in torch (L-BFGS, L2 penalty).

A head is one small safetensors file: the standardisation, the weights and a JSON header that
names the target (alias and weights fingerprint), the layer, the feature rule, the training
problem ids and the settings and measurements of its fit. Loading it for another target is
refused in one sentence.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import save_file

from seed_tot.errors import ConfigError

HEADER_KEY = "seed_tot_value_head"
FORMAT_VERSION = 1


@dataclass
class ValueHead:
    layer: int
    mean: torch.Tensor  # (hidden,)
    scale: torch.Tensor  # (hidden,)
    weight: torch.Tensor  # (hidden,)
    bias: float
    meta: dict = field(default_factory=dict)

    def probability(self, features: torch.Tensor) -> torch.Tensor:
        """P(correct) for features (N, hidden) of this head's layer."""
        z = (features.float() - self.mean) / self.scale
        return torch.sigmoid(z @ self.weight + self.bias)

    @property
    def head_id(self) -> str:
        return str(self.meta.get("head_id", "unnamed"))

    def save(self, path: Path) -> None:
        """Written to a temporary file, then renamed: a stopped run never leaves half a head."""
        path.parent.mkdir(parents=True, exist_ok=True)
        meta = {**self.meta, "format": FORMAT_VERSION, "layer": self.layer, "bias": self.bias}
        tensors = {"mean": self.mean.contiguous(), "scale": self.scale.contiguous(), "weight": self.weight.contiguous()}
        partial = path.with_name(path.name + ".partial")
        save_file(tensors, str(partial), metadata={HEADER_KEY: json.dumps(meta)})
        os.replace(partial, path)


def load_head(path: Path, target_name: str | None = None, target_fingerprint: str | None = None) -> ValueHead:
    """The head in `path`; with a target fingerprint, refused unless it was trained on that target."""
    if not Path(path).is_file():
        raise ConfigError(f"No value head at {path}: train one with `seed-tot train value`, or leave out --value-model.")
    try:
        with safe_open(str(path), framework="pt") as handle:
            meta = json.loads((handle.metadata() or {})[HEADER_KEY])
            tensors = {name: handle.get_tensor(name) for name in ("mean", "scale", "weight")}
    except (KeyError, ValueError, OSError, SafetensorError) as error:
        raise ConfigError(f"{path} is not a seed-tot value head ({type(error).__name__}): "
                          "give a file written by `seed-tot train value`.") from None
    if target_fingerprint is not None and meta.get("target_fingerprint") != target_fingerprint:
        raise ConfigError(
            f"The value head {path} was trained on {meta.get('target')!r} (weights {meta.get('target_fingerprint')}), "
            f"not on this target {target_name!r} (weights {target_fingerprint}): train a head for this target "
            "with `seed-tot train value --target ...`, or use --value-mode logits."
        )
    from seed_tot.values.features import FEATURE_RULE

    if meta.get("feature_rule") != FEATURE_RULE:
        raise ConfigError(f"The value head {path} reads the target's hidden states by another rule than this version "
                          "of seed-tot: train it again with `seed-tot train value --no-collect --out NEW_FOLDER`.")
    return ValueHead(layer=int(meta["layer"]), mean=tensors["mean"].float(), scale=tensors["scale"].float(),
                     weight=tensors["weight"].float(), bias=float(meta["bias"]), meta=meta)


def standardiser(features: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    mean = features.mean(dim=0)
    scale = features.std(dim=0).clamp_min(1e-4)
    return mean, scale


def fit_logistic(
    features: torch.Tensor, labels: torch.Tensor, weights: torch.Tensor, l2: float, steps: int = 200
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, float]:
    """(mean, scale, weight, bias) minimising the weighted log-loss + l2 * |w|^2 / 2 on standardised
    features. Weights are normalised to mean 1."""
    mean, scale = standardiser(features)
    x = (features.float() - mean) / scale
    y = labels.float()
    sample_weight = weights.float() / weights.float().mean()
    w = torch.zeros(x.shape[1], requires_grad=True)
    b = torch.zeros(1, requires_grad=True)
    optimiser = torch.optim.LBFGS([w, b], lr=1.0, max_iter=steps, line_search_fn="strong_wolfe")

    def closure():
        optimiser.zero_grad()
        logits = x @ w + b
        loss = torch.nn.functional.binary_cross_entropy_with_logits(logits, y, weight=sample_weight)
        loss = loss + 0.5 * l2 * (w * w).sum()
        loss.backward()
        return loss

    with torch.enable_grad():
        optimiser.step(closure)
    return mean, scale, w.detach(), float(b.detach())
