"""What identifies a machine for a speed measurement: CPU model and flags, cores, library versions,
and the memory bandwidth torch reads at (measured, recorded beside the figures, not part of the key)."""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
import platform
import time
from functools import lru_cache
from pathlib import Path


def _cpuinfo_field(name: str) -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == name:
                return value.strip()
    except OSError:
        pass
    return ""


def cores_available() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


@lru_cache(maxsize=1)
def machine_identity() -> dict:
    """The facts a cached measurement must match to be reused: same CPU, cores and libraries."""
    flags = sorted(_cpuinfo_field("flags").split())
    return {
        "cpu_model": _cpuinfo_field("model name") or platform.processor() or platform.machine(),
        "cpu_flags_sha256": hashlib.sha256(" ".join(flags).encode()).hexdigest()[:16],
        "vector_flags": [f for f in flags if f.startswith(("avx", "amx", "fma", "sse4"))],
        "cores": cores_available(),
        "torch": _version("torch"),
        "transformers": _version("transformers"),
        "xllamacpp": _version("xllamacpp"),
    }


def identity_key(identity: dict) -> str:
    fields = {k: v for k, v in identity.items() if k != "vector_flags"}
    return hashlib.sha256(repr(sorted(fields.items())).encode()).hexdigest()[:16]


def read_bandwidth_gb_s(megabytes: int = 256, repeats: int = 3) -> float:
    """How fast torch reads memory here: the best of a few sums over a float32 tensor far larger
    than the caches."""
    import torch

    values = torch.ones(megabytes * 2**20 // 4)
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        values.sum()
        best = min(best, time.perf_counter() - started)
    return round(values.numel() * 4 / best / 1e9, 1)
