"""What identifies a machine for a speed measurement: CPU model and vector flags, cores, library
versions; and the memory bandwidth torch reads at (measured, recorded beside the figures, not part of
the key)."""

from __future__ import annotations

import hashlib
import importlib.metadata
import time
from functools import lru_cache

from seed_tot.machine_facts import cpu_facts


def _version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


@lru_cache(maxsize=1)
def machine_identity() -> dict:
    """The facts a cached measurement must match to be reused: same CPU (model and the vector flags
    its products' speed depends on), cores and libraries."""
    cpu = cpu_facts()
    return {
        "cpu_model": cpu["model"],
        "vector_flags": cpu["vector_flags"],
        "cores": cpu["cores_available"],
        "torch": _version("torch"),
        "transformers": _version("transformers"),
        "xllamacpp": _version("xllamacpp"),
    }


def identity_key(identity: dict) -> str:
    return hashlib.sha256(repr(sorted(identity.items())).encode()).hexdigest()[:16]


def read_bandwidth_gb_s(megabytes: int = 256, repeats: int = 8) -> float:
    """How fast torch reads memory here: the best of a few sums over a float32 tensor far larger
    than the caches."""
    import torch

    import seed_tot.runtime  # noqa: F401  (flushes subnormals before this sum starts torch's threads)

    values = torch.ones(megabytes * 2**20 // 4)
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        values.sum()
        best = min(best, time.perf_counter() - started)
    return round(values.numel() * 4 / best / 1e9, 1)

