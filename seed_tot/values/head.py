"""The learned judge's head: standardised hidden-state features -> P(the state reaches a correct
answer), a logistic regression fit in torch (L-BFGS, L2 penalty).

A head is one small safetensors file: the standardisation, the weights and a JSON header that
names the target (alias and weights fingerprint), the layer, the feature rule, the training
problem ids and the settings and measurements of its fit. Loading it for another target is
refused in one sentence.

A head fit on whole chains may carry a second head for the states that give no answer yet (a
tree's partial states: `steps`, fit on every state), because a chain head reads such a state at a
position it never saw in training. Its tensors are stored under "steps." and its settings in the
header's "steps" object.
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
TENSOR_NAMES = ("mean", "scale", "weight")
STEPS_PREFIX = "steps."


@dataclass
class ValueHead:
    layer: int
    mean: torch.Tensor  # (hidden,)
    scale: torch.Tensor  # (hidden,)
    weight: torch.Tensor  # (hidden,)
    bias: float
    meta: dict = field(default_factory=dict)
    steps: ValueHead | None = None  # the head for states that give no answer, if this one reads only chains

    def probability(self, features: torch.Tensor) -> torch.Tensor:
        """P(correct) for features (N, hidden) of this head's layer."""
        z = (features.float() - self.mean) / self.scale
        return torch.sigmoid(z @ self.weight + self.bias)

    @property
    def head_id(self) -> str:
        return str(self.meta.get("head_id", "unnamed"))

    @property
    def layers(self) -> tuple[int, ...]:
        """The layers this head (and its step head) read."""
        return tuple(sorted({self.layer} | ({self.steps.layer} if self.steps else set())))

    def for_state(self, gives_answer: bool) -> ValueHead:
        """The head that rates a state: this one, or its step head for a state without an answer."""
        return self if gives_answer or self.steps is None else self.steps

    def _tensors(self, prefix: str = "") -> dict[str, torch.Tensor]:
        return {prefix + name: getattr(self, name).contiguous() for name in TENSOR_NAMES}

    def save(self, path: Path) -> None:
        """Written to a temporary file, then renamed: a stopped run never leaves half a head."""
        path.parent.mkdir(parents=True, exist_ok=True)
        meta = {**self.meta, "format": FORMAT_VERSION, "layer": self.layer, "bias": self.bias}
        tensors = self._tensors()
        if self.steps is not None:
            meta["steps"] = {**self.steps.meta, "layer": self.steps.layer, "bias": self.steps.bias}
            tensors.update(self.steps._tensors(STEPS_PREFIX))
        partial = path.with_name(path.name + ".partial")
        save_file(tensors, str(partial), metadata={HEADER_KEY: json.dumps(meta)})
        os.replace(partial, path)


def _meta(handle) -> dict:
    """A head file's own header entry (KeyError: the file is not a seed-tot head)."""
    return json.loads((handle.metadata() or {})[HEADER_KEY])


def head_target_name(path: Path) -> str | None:
    """The target a head file names as the one it was trained for (None: not a seed-tot head)."""
    try:
        with safe_open(str(path), framework="pt") as handle:
            return _meta(handle).get("target")
    except (KeyError, ValueError, OSError, SafetensorError):
        return None


def load_head(path: Path, target_name: str | None = None, target_fingerprint: str | None = None) -> ValueHead:
    """The head in `path`; with a target fingerprint, refused unless it was trained on that target."""
    if not Path(path).is_file():
        raise ConfigError(f"No value head at {path}: train one with `seed-tot train value`, or leave out --value-model.")
    try:
        with safe_open(str(path), framework="pt") as handle:
            meta = _meta(handle)
            tensors = {name: handle.get_tensor(name) for name in handle.keys()}
            missing = [name for name in TENSOR_NAMES if name not in tensors]
            if missing:
                raise KeyError(missing[0])
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
    steps = meta.pop("steps", None)
    head = _head(meta, tensors)
    if steps is not None:
        head.steps = _head(steps, {name[len(STEPS_PREFIX):]: t for name, t in tensors.items()
                                   if name.startswith(STEPS_PREFIX)})
    return head


def _head(meta: dict, tensors: dict[str, torch.Tensor]) -> ValueHead:
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
