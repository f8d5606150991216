"""Linear layers with int8 weights and int8 products (fbgemm's dynamic quantization, CPU): opt-in, lossy.

Each output channel's weights are rounded to int8 with their own scale (the largest magnitude maps
to 127); each call rounds its input activations with one scale for the whole call, and fbgemm
multiplies the rounded values (AVX-512 VNNI where the CPU has it). Activations get 8 bits where the
CPU's kernel sums the products exactly, and 7 bits where it does not: fbgemm's AVX2 kernel adds pairs
of u8 x s8 products in 16-bit registers, which saturate at full 8-bit activations (torch's own
`reduce_range`). Which one a CPU needs is measured (`activation_levels`), not read from its flags. On the default target's
decode widths that product is about twice as fast as the packed bfloat16 one (docs/engines.md#int8-linear-layers).
It is not exact: the target's greedy choice changed at about 1 position in 100 (measured), and since one
scale covers all rows of a call, a row's rounding depends on the other rows decoded beside it.
The MLP's down projections stay 16-bit: their inputs carry the activation outliers, and rounding
them too lowered the teacher-forced agreement with the 16-bit target from 97% to 92% (measured).
"""

from __future__ import annotations

import warnings
from functools import lru_cache

import torch
import torch.nn.functional as F

from seed_tot.errors import ConfigError


def _quantized_weight(weight: torch.Tensor) -> torch.Tensor:
    """Per-output-channel symmetric int8: each row's largest magnitude becomes 127."""
    weight = weight.detach().float()
    scales = (weight.abs().amax(dim=1) / 127).clamp_min(1e-12)
    zero_points = torch.zeros(weight.shape[0], dtype=torch.long)
    with warnings.catch_warnings():
        # torch announces the end of its quantized tensors; the pinned version has them, and
        # require_int8() turns --int8 away in one sentence on a build without them
        warnings.filterwarnings("ignore", message=".*quantized tensor creation functions.*")
        return torch.quantize_per_channel(weight, scales.double(), zero_points, 0, torch.qint8)


def _prepack(weight: torch.Tensor, bias: torch.Tensor | None):
    return torch.ops.quantized.linear_prepack(_quantized_weight(weight), None if bias is None else bias.detach().float())


def _product(x: torch.Tensor, packed, reduce_range: bool) -> torch.Tensor:
    return torch.ops.quantized.linear_dynamic(x.float(), packed, reduce_range)


def rounded_product(x: torch.Tensor, weight: torch.Tensor, levels: int) -> torch.Tensor:
    """What an exact int8 product gives: per-output-channel int8 weights times the input rounded to
    `levels` + 1 steps (255: 8 bits, 127: 7 bits) with one affine scale for the whole call."""
    weight = weight.float()
    w_scale = (weight.abs().amax(dim=1, keepdim=True) / 127).clamp_min(1e-12)
    w = torch.round(weight / w_scale).clamp(-127, 127) * w_scale
    x = x.float()
    low, high = min(float(x.min()), 0.0), max(float(x.max()), 0.0)
    x_scale = max((high - low) / levels, 1e-12)
    zero = round(-low / x_scale)
    xq = (torch.round(x / x_scale) + zero).clamp(0, levels)
    return F.linear((xq - zero) * x_scale, w)


def _probe_case() -> tuple[torch.Tensor, torch.Tensor]:
    """Weights and inputs at full scale: the largest weights of each row side by side with large
    positive inputs, where 16-bit pair sums overflow (2 x 255 x 127 > 32767)."""
    generator = torch.Generator().manual_seed(0)
    weight = torch.randn(48, 64, generator=generator)
    weight[:, :8] = weight.abs().amax(dim=1, keepdim=True) * torch.tensor([1.0, 1.0, -1.0, -1.0]).repeat(2)
    x = torch.randn(5, 64, generator=generator).abs()
    x[:, :8] = x.amax(dim=1, keepdim=True)
    return weight, x


def _exact_at(levels: int, weight: torch.Tensor, x: torch.Tensor, packed) -> bool:
    got = _product(x, packed, reduce_range=levels == 127)
    want = rounded_product(x, weight, levels)
    return bool((got - want).abs().max() <= 1e-4 * float(want.abs().max()))


@lru_cache(maxsize=None)
def activation_levels() -> int | None:
    """How finely this CPU's fbgemm int8 product can round activations and still compute exactly
    what the rounded values give: 255 (8 bits), 127 (7 bits), or None where neither holds (or this
    torch build has no such product). Measured once per process on a full-scale case."""
    weight, x = _probe_case()
    try:
        packed = _prepack(weight, None)
        return next((levels for levels in (255, 127) if _exact_at(levels, weight, x, packed)), None)
    except (RuntimeError, AttributeError, NotImplementedError):
        return None


def int8_works() -> bool:
    """True when this torch build runs an exact int8 product on this CPU (at 8 or 7 bits)."""
    return activation_levels() is not None


def require_int8(device: torch.device) -> None:
    if device.type != "cpu":
        raise ConfigError("--int8 runs on a CPU only: leave out --int8 or use --device cpu.")
    if not int8_works():
        raise ConfigError("--int8 needs a torch build whose fbgemm int8 product is exact on this CPU, "
                          "and it is not here: leave out --int8.")


class Int8Linear(torch.nn.Module):
    """An inference-only stand-in for nn.Linear with int8 weights; input and output keep their dtype."""

    def __init__(self, linear: torch.nn.Linear):
        super().__init__()
        self.in_features = linear.in_features
        self.out_features = linear.out_features
        self.packed = _prepack(linear.weight, linear.bias)  # the bias travels inside the packed weight

    @property
    def opaque_weight_bytes(self) -> int:
        """What the packed weight holds outside the module's parameters and buffers (a memory budget
        must count it): one byte per value, and per output channel a float64 scale, an int64 zero
        point, a float32 bias and fbgemm's int32 column offset."""
        return self.in_features * self.out_features + 24 * self.out_features

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        leading = x.shape[:-1]
        flat = x.reshape(-1, self.in_features)
        product = _product(flat, self.packed, reduce_range=activation_levels() == 127)
        return product.to(x.dtype).reshape(*leading, self.out_features)


def stays_16_bit(layer: torch.nn.Linear, intermediate_size: int | None) -> bool:
    """The MLP's down projection (it reads the MLP's wide intermediate activations) stays 16-bit."""
    return intermediate_size is not None and layer.in_features == intermediate_size


def _intermediate_size(model: torch.nn.Module) -> int | None:
    config = getattr(model, "config", None)
    return getattr(getattr(config, "get_text_config", lambda: config)(), "intermediate_size", None)


def quantize_if_loaded(model: torch.nn.Module, module_name: str) -> bool:
    """Make the nn.Linear named `module_name` an Int8Linear once its tensors hold values, unless it
    stays 16-bit; True if it was made int8."""
    layer = model.get_submodule(module_name)
    if type(layer) is not torch.nn.Linear or any(t.is_meta for t in layer.parameters()):
        return False
    if stays_16_bit(layer, _intermediate_size(model)):
        return False
    parent_name, _, leaf = module_name.rpartition(".")
    setattr(model.get_submodule(parent_name), leaf, Int8Linear(layer))
    return True


def quantize_linear_layers(model: torch.nn.Module) -> int:
    """Make every loaded nn.Linear of the model int8, except the down projections; return how many."""
    names = [name for name, module in model.named_modules() if type(module) is torch.nn.Linear]
    return sum(quantize_if_loaded(model, name) for name in names)


def int8_layer_count(model: torch.nn.Module) -> int:
    return sum(isinstance(module, Int8Linear) for module in model.modules())
