"""Linear layers with int8 weights and int8 products (fbgemm's dynamic quantization, CPU): opt-in, lossy.

Each output channel's weights are rounded to int8 with their own scale (the largest magnitude maps
to 127); each call rounds its input activations to 8 bits with one scale for the whole call, and
fbgemm multiplies the 8-bit values (AVX-512 VNNI where the CPU has it). On the default target's
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
        # int8_works() turns --int8 away in one sentence on a build without them
        warnings.filterwarnings("ignore", message=".*quantized tensor creation functions.*")
        return torch.quantize_per_channel(weight, scales.double(), zero_points, 0, torch.qint8)


def _prepack(weight: torch.Tensor, bias: torch.Tensor | None):
    return torch.ops.quantized.linear_prepack(_quantized_weight(weight), None if bias is None else bias.detach().float())


def _product(x: torch.Tensor, packed) -> torch.Tensor:
    return torch.ops.quantized.linear_dynamic(x.float(), packed, False)


@lru_cache(maxsize=None)
def int8_works() -> bool:
    """True when this torch build runs fbgemm's int8 product on this CPU and it computes what the
    rounded values give, including at full scale (where a CPU without VNNI saturates)."""
    generator = torch.Generator().manual_seed(0)
    weight = torch.randn(48, 64, generator=generator)
    weight[:, :8] = weight.abs().amax(dim=1, keepdim=True) * torch.tensor([1.0, -1.0]).repeat(4)
    x = torch.randn(5, 64, generator=generator).abs()
    try:
        got = _product(x, _prepack(weight, None))
    except (RuntimeError, AttributeError, NotImplementedError):
        return False
    want = F.linear(x, weight)
    return bool(torch.allclose(got, want, rtol=0.05, atol=0.05 * float(want.abs().max())))


def require_int8(device: torch.device) -> None:
    if device.type != "cpu" or not int8_works():
        raise ConfigError("--int8 needs a CPU whose torch build runs fbgemm's int8 products: leave out --int8.")


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
        return _product(flat, self.packed).to(x.dtype).reshape(*leading, self.out_features)


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
