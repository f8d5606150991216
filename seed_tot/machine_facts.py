"""The machine facts a measurement needs beside it: which CPU (model, vector flags, cores), the
load, the code's revision, peak memory, and how much of the machine other processes held."""

from __future__ import annotations

import os
import platform
import resource
import subprocess
import time
from pathlib import Path


VECTOR_FLAG_PREFIXES = ("avx", "amx", "fma", "f16c", "sse4")  # the flags a CPU's matmul speed depends on


def cpu_facts(cpuinfo: str | None = None) -> dict:
    """Which CPU a measurement ran on: its model name and the vector flags that set its speed
    (AVX2, AVX-512 BF16, AMX, ...), read from /proc/cpuinfo (`cpuinfo`: its text, for tests)."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            cpuinfo = ""
    fields: dict[str, str] = {}
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    flags = sorted(f for f in fields.get("flags", "").split() if f.startswith(VECTOR_FLAG_PREFIXES))
    return {"model": fields.get("model name") or platform.processor() or platform.machine(), "vector_flags": flags,
            "cores_available": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()}


def load_average() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def git_revision() -> str | None:
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def peak_rss_mib() -> float:
    """This process's peak resident memory so far (Linux reports kilobytes)."""
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def child_peak_rss_mib(pid: int) -> float:
    """The peak resident memory of another running process (Linux's /proc), 0 when unknown."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def machine_facts() -> dict:
    """What a benchmark record needs to be read later: when, where, under what load, which code."""
    import torch

    return {
        "at": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        "load_average": load_average(),
        "cpu_count": os.cpu_count(),
        "cpu": cpu_facts(),
        "threads": torch.get_num_threads(),
        "platform": platform.platform(),
        "torch": torch.__version__,
        "git": git_revision(),
        "peak_rss_mib": peak_rss_mib(),
    }


def busy_cpu_seconds() -> float | None:
    """CPU seconds every process on the machine has spent (Linux's /proc/stat), None elsewhere."""
    try:
        with open("/proc/stat") as stat:
            fields = stat.readline().split()[1:]
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
