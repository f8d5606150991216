"""The fastest a path can decode at a width: from the bytes of weights it must read every step and
the memory bandwidth measured here, and from the arithmetic a step does and the rate this CPU's
products reach in the path's dtype (timed in a fraction of a second). A path whose bound is below a
speed already measured cannot win, so it is not loaded and timed (a model's load is the probe's
longest part)."""

from __future__ import annotations

from functools import lru_cache
from math import prod
from pathlib import Path

from seed_tot.calibration.probe import RunPath

DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}
INT8_BYTES = 1


@lru_cache(maxsize=8)  # the calibration bounds every path, and every measured one, from the same headers
def weights_read_every_step(model_dir: Path) -> int | None:
    """Weight values a decode step reads at least: all but the embedding tables (only a few of their
    rows are read; an output head tied to them is left out too, so the bound errs high, never low).
    None where the folder holds no safetensors."""
    from seed_tot.models.streamed_cast import safetensors_header

    files = sorted(Path(model_dir).glob("*.safetensors"))
    if not files:
        return None
    return sum(prod(entry["shape"]) for path in files for name, entry in safetensors_header(path)[0].items()
               if "embed" not in name and name != "lm_head.weight")


def target_weights(target: str) -> int | None:
    from seed_tot.models.loading import local_model_dir

    model_dir = local_model_dir(target)
    return weights_read_every_step(model_dir) if model_dir is not None else None


def speed_bound(target: str, path: RunPath, width: int, bandwidth_gb_s: float) -> float | None:
    """Tokens/s that `path` cannot exceed at `width` rows (each step reads its weights once and
    makes one token a row); None where it cannot be bounded (an engine's own file, no local model)."""
    if path.dtype is None or bandwidth_gb_s <= 0:
        return None
    values = target_weights(target)
    if not values:
        return None
    step_bytes = values * (INT8_BYTES if path.int8 else DTYPE_BYTES[path.dtype])
    return width * bandwidth_gb_s * 1e9 / step_bytes


def compute_bound(target: str, path: RunPath, width: int) -> float | None:
    """Tokens/s that `path` cannot exceed at `width` rows for its arithmetic: each token costs two
    operations a weight, at the rate this CPU's fastest product of the path's dtype reaches at that
    width. A single layer's product is the best case (no attention, no small ops, its weights partly
    in cache), so the bound errs high, never low. None for an engine or int8 layers (their kernels are
    not the ones timed here) or where the target is not local."""
    if path.dtype is None or path.int8:
        return None
    values = target_weights(target)
    if not values:
        return None
    return product_rate(path.dtype, width) / (2 * values)


@lru_cache(maxsize=None)
def product_rate(dtype: str, rows: int) -> float:
    """Operations a second of this machine's faster product, plain or packed for oneDNN where that
    works, of one model-sized layer (packed_linear.PROBE_SHAPE) at `rows` rows in `dtype`, the best of 5."""
    import torch
    import torch.nn.functional as F

    from seed_tot.runtime.packed_linear import PROBE_SHAPE, best_seconds, packed_product_of, packing_works

    torch_dtype = getattr(torch, dtype)
    generator = torch.Generator().manual_seed(0)
    weight = torch.randn(*PROBE_SHAPE, generator=generator).to(torch_dtype)
    x = torch.randn(rows, PROBE_SHAPE[1], generator=generator).to(torch_dtype)
    products = [lambda: F.linear(x, weight)]
    if packing_works(torch_dtype):
        products.append(packed_product_of(weight, x))
    seconds = min(best_seconds(product) for product in products)
    return 2 * rows * PROBE_SHAPE[0] * PROBE_SHAPE[1] / seconds
