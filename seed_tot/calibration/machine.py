"""What identifies a machine for a speed measurement: CPU model and vector flags, cores, library
versions; and the memory bandwidth torch reads at (measured, recorded beside the figures, not part of
the key)."""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
import resource
import time
from functools import lru_cache

from seed_tot.records import cpu_facts


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


def busy_cpu_seconds() -> float | None:
    """CPU seconds every process on the machine has spent (Linux's /proc/stat), None elsewhere."""
    try:
        fields = open("/proc/stat").readline().split()[1:]
    except OSError:
        return None
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(x) for x in fields[:8])
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def own_cpu_seconds() -> float:
    """CPU seconds of this process and its finished children (an engine's server runs in this process)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


class OtherWork:
    """The share of the machine's cores that other processes held while a measurement ran: a
    direct reading of the noise, where the load average lags by a minute and counts this process."""

    def __init__(self) -> None:
        self.started = (time.perf_counter(), busy_cpu_seconds(), own_cpu_seconds())

    def share(self, cores: int) -> float | None:
        wall, busy, own = time.perf_counter(), busy_cpu_seconds(), own_cpu_seconds()
        wall0, busy0, own0 = self.started
        if busy is None or busy0 is None or wall <= wall0:
            return None
        return round(max(0.0, (busy - busy0) - (own - own0)) / ((wall - wall0) * cores), 3)
