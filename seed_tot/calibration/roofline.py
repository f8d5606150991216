"""The fastest a path can decode at a width, from the bytes of weights it must read every step and
the memory bandwidth measured here: a path whose bound is below a speed already measured cannot
win, so it is not loaded and timed (float32's load is the probe's longest)."""

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


def speed_bound(target: str, path: RunPath, width: int, bandwidth_gb_s: float) -> float | None:
    """Tokens/s that `path` cannot exceed at `width` rows (each step reads its weights once and
    makes one token a row); None where it cannot be bounded (an engine's own file, no local model)."""
    from seed_tot.models.loading import local_model_dir

    if path.dtype is None or bandwidth_gb_s <= 0:
        return None
    model_dir = local_model_dir(target)
    values = weights_read_every_step(model_dir) if model_dir is not None else None
    if not values:
        return None
    step_bytes = values * (INT8_BYTES if path.int8 else DTYPE_BYTES[path.dtype])
    return width * bandwidth_gb_s * 1e9 / step_bytes
