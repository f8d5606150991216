"""Linear layers with their weights reordered once into oneDNN's blocked layout (CPU).

A plain `F.linear` of a decode step's few rows can be far slower than the same product on a weight
reordered once: in bfloat16 (likely a reorder per call), and in float32 on CPUs where MKL's sgemm
copies the whole weight into its own layout at every call (a profile of the default GSM8K run on an
AVX2-only CPU spent 30% of its decode steps in that copy, 16% in the product itself). bfloat16 layers
are packed wherever the packed product works here; float32 layers where a timed probe at decode
widths shows the packed product clearly faster on this machine (`float32_packing_pays`), and only
layers of at least MIN_FLOAT32_WEIGHTS values, so small models (the tiny test models that the lossless
tests run in float32) keep the plain kernels. float16 is left plain, where packing gained nothing
(measured: docs/models.md#bfloat16-linear-layers-packed-once-at-load). Every executor shares the one
packed model, so all of them decode the same model; tests/test_packed_linear.py checks that a
packed layer computes the plain layer's product.
"""

from __future__ import annotations

import ctypes
import os
from functools import lru_cache

import torch
import torch.nn.functional as F

PACKABLE_DTYPES = (torch.bfloat16, torch.float32)
MIN_FLOAT32_WEIGHTS = 1 << 20  # smaller float32 layers stay plain: their product is cheap either way
PROBE_SHAPE = (5632, 2048)  # (out, in) of the timed products: a 1-2B model's MLP layer
_PROBE_ROWS = (4, 16)  # decode widths: one problem's chains, many problems at once
_CLEAR_WIN = 0.8  # packed float32 must take at most this share of the plain product's time
_BATCH_HINT = 32  # the row count oneDNN lays the packed weight out for (a wide decode step)
_ENV_SWITCH = "SEED_TOT_PACK_WEIGHTS"  # "0" turns packing off (an A/B benchmark's other arm)


def _mkldnn_ops_present() -> bool:
    ops = torch.ops.mkldnn
    return torch.backends.mkldnn.is_available() and hasattr(ops, "_reorder_linear_weight") and hasattr(
        ops, "_linear_pointwise"
    )


def _pack(weight: torch.Tensor) -> torch.Tensor:
    return torch.ops.mkldnn._reorder_linear_weight(weight.detach(), _BATCH_HINT)


def _packed_product(x: torch.Tensor, packed: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    return torch.ops.mkldnn._linear_pointwise(x, packed, bias, "none", [], "")


@lru_cache(maxsize=None)
def packing_works(dtype: torch.dtype) -> bool:
    """True when this torch build and CPU run a packed product in `dtype` and it matches F.linear."""
    if dtype not in PACKABLE_DTYPES or not _mkldnn_ops_present():
        return False
    generator = torch.Generator().manual_seed(0)
    weight = torch.randn(48, 64, generator=generator).to(dtype)
    bias = torch.randn(48, generator=generator).to(dtype)
    x = torch.randn(5, 64, generator=generator).to(dtype)
    try:
        got = _packed_product(x, _pack(weight), bias)
    except RuntimeError:  # no oneDNN kernel for this dtype on this CPU
        return False
    return bool(torch.allclose(got.float(), F.linear(x, weight, bias).float(), rtol=1e-2, atol=1e-2))


def packed_product_of(weight: torch.Tensor, x: torch.Tensor):
    """A call of the packed product of `x` by `weight` (packed once here), for timing."""
    packed = _pack(weight)
    return lambda: _packed_product(x, packed, None)


def best_seconds(product, repeats: int = 5) -> float:
    """The fastest of `repeats` timed calls of `product`, after one untimed call that pays its set-up."""
    import time

    product()
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        product()
        best = min(best, time.perf_counter() - started)
    return best


def _best_ms(product) -> float:
    return best_seconds(product) * 1000


@lru_cache(maxsize=None)
def float32_packing_pays() -> bool:
    """True when, on this machine, the packed float32 product at decode widths takes clearly less
    time than F.linear (measured once per process, ~0.2 s): chosen by timing, not by CPU flags."""
    if not packing_works(torch.float32):
        return False
    generator = torch.Generator().manual_seed(0)
    weight = torch.randn(*PROBE_SHAPE, generator=generator)
    packed = _pack(weight)
    plain_ms = packed_ms = 0.0
    for rows in _PROBE_ROWS:
        x = torch.randn(rows, PROBE_SHAPE[1], generator=generator)
        plain_ms += _best_ms(lambda: F.linear(x, weight))
        packed_ms += _best_ms(lambda: _packed_product(x, packed, None))
    return packed_ms <= _CLEAR_WIN * plain_ms


def should_pack(layer: torch.nn.Linear) -> bool:
    """Whether this loaded layer of a CPU model is packed (see the module's docstring)."""
    dtype = layer.weight.dtype
    if layer.weight.device.type != "cpu" or not packing_enabled() or not packing_works(dtype):
        return False
    return dtype != torch.float32 or (layer.weight.numel() >= MIN_FLOAT32_WEIGHTS and float32_packing_pays())


def packing_enabled() -> bool:
    return os.environ.get(_ENV_SWITCH, "1") != "0"


class PackedLinear(torch.nn.Module):
    """An inference-only stand-in for nn.Linear whose weight is stored pre-reordered."""

    def __init__(self, linear: torch.nn.Linear):
        super().__init__()
        self.in_features = linear.in_features
        self.out_features = linear.out_features
        self.register_buffer("packed_weight", _pack(linear.weight), persistent=False)
        self.register_buffer("bias", None if linear.bias is None else linear.bias.detach(), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        leading = x.shape[:-1]
        flat = x.reshape(-1, self.in_features).contiguous()
        return _packed_product(flat, self.packed_weight, self.bias).reshape(*leading, self.out_features)


def packing_applies(device: torch.device, dtype: torch.dtype) -> bool:
    """True when a model on `device` in `dtype` gets its linear layers packed (a CPU, a packable
    dtype whose packed product works here, packing not turned off)."""
    return device.type == "cpu" and packing_enabled() and packing_works(dtype)


def packed_layer_count(model: torch.nn.Module) -> int:
    return sum(isinstance(module, PackedLinear) for module in model.modules())


def pack_if_loaded(model: torch.nn.Module, module_name: str) -> bool:
    """Pack the nn.Linear named `module_name` once all its tensors hold values; True if packed."""
    layer = model.get_submodule(module_name)
    if type(layer) is not torch.nn.Linear or any(t.is_meta for t in layer.parameters()) or not should_pack(layer):
        return False
    parent_name, _, leaf = module_name.rpartition(".")
    setattr(model.get_submodule(parent_name), leaf, PackedLinear(layer))
    return True


@lru_cache(maxsize=None)
def _malloc_trim():
    try:
        return ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):  # not glibc
        return None


def return_freed_memory() -> None:
    """Hand the allocator's freed pages back to the system (glibc's malloc_trim; nothing elsewhere).
    glibc keeps freed blocks under 32 MB in its heap, so the plain weights freed while packing stayed
    resident (1.9 GiB of the 1.5B target in bfloat16) without this."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


def pack_linear_layers(model: torch.nn.Module, copy_out: bool = True) -> int:
    """Replace every nn.Linear of a CPU model that should_pack by a PackedLinear, where this
    build and CPU support it and the environment does not turn it off; return how many. Layers
    left empty (meta weights, as a judge's reading target leaves the layers above its head) stay.
    copy_out: give the tensors left plain their own storage, which a model loaded by transformers
    needs (see _copy_out_of_loaded_storage); False for a model whose tensors read_cast read."""
    dtype = next(model.parameters()).dtype
    if not packing_applies(next(model.parameters()).device, dtype):
        return 0
    packed = 0
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if (type(child) is torch.nn.Linear and child.weight.dtype == dtype and not child.weight.is_meta
                    and should_pack(child)):
                setattr(parent, name, PackedLinear(child))
                packed += 1
    if packed and copy_out:
        _copy_out_of_loaded_storage(model)
    if packed:
        return_freed_memory()
    return packed


def _copy_out_of_loaded_storage(model: torch.nn.Module) -> None:
    """Give every tensor the packing left in place (embeddings, norms, biases) its own storage.

    A model loaded in its stored dtype maps the weights file, and packing reads every page of it;
    while any tensor still views the mapping, all those pages stay resident beside their packed
    copies (measured: 6.4 GiB resident after loading the 1.5B target in bfloat16, 3.9 GiB once the
    rest is copied). Copying the few unpacked tensors lets the mapping go."""
    with torch.no_grad():
        for parameter in model.parameters():  # each shared (tied) parameter once
            if not parameter.is_meta:
                parameter.data = parameter.data.clone()
        for module in model.modules():
            for name, buffer in module._buffers.items():
                if buffer is not None and buffer.layout == torch.strided and not buffer.is_meta:
                    module._buffers[name] = buffer.clone()
