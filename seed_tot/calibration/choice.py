"""The candidate paths for a target on this machine, their timings, the fastest one, and the cached
record of that measurement (one JSON file per machine, target and width)."""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path as FilePath
from typing import Callable

from pydantic import BaseModel

from seed_tot.calibration.machine import identity_key, machine_identity, read_bandwidth_gb_s
from seed_tot.calibration.probe import NEW_TOKENS, ROUNDS, RunPath, Timing, time_path
from seed_tot.calibration.roofline import compute_bound, speed_bound
from seed_tot.errors import SeedTotError
from seed_tot.scheduling.methods import runs_on_llama_cpp
from seed_tot.records import write_json_atomically
from seed_tot.machine_facts import OtherWork, load_average

CALIBRATION_ENV = "SEED_TOT_CALIBRATION_DIR"
WIDTHS = (4, 8, 16)  # rows timed at once; a run's width is rounded up to one of these (wider costs minutes here)
IN_PROCESS_METHOD = "batched-lookup"
ENGINE_METHOD = "llama-cpp"
RECORD_VERSION = 3
ROOFLINE_MARGIN = 1.25  # a path is left out only where even 1.25x its bound is below the best measured
BUSY_SHARE = 0.25  # other processes' share of the cores above which a measurement is flagged


class Calibration(BaseModel):
    """One measurement: every candidate's tokens/s at `width` rows, and the path chosen."""

    version: int = RECORD_VERSION
    target: str
    target_id: str
    width: int
    new_tokens: int
    max_rounds: int  # timed rounds per path at most (one where nothing else ran), the fastest kept
    machine: dict
    machine_key: str
    bandwidth_gb_s: float
    load_average: list[float]  # 1, 5 and 15 minutes, as the measurement started
    other_work_share: float | None  # other processes' share of the cores while it ran (None: not readable here)
    measured_at: str
    int8_allowed: bool
    timings: list[dict]
    chosen: dict  # method, dtype (None: the engine's file), int8, label

    def line(self) -> str:
        """The one line a run prints: what runs and why."""
        ranked = sorted((t for t in self.timings if "tokens_per_second" in t), key=lambda t: -t["tokens_per_second"])
        others = ", ".join(f"{t['label']} {t['tokens_per_second']:.1f}" for t in ranked[1:])
        best = ranked[0]
        busy = (f"; other work held {self.busy_share:.0%} of the cores meanwhile: "
                "run `seed-tot calibrate` again when the machine is quiet" if self.was_busy else "")
        return (f"auto: {best['label']} ({best['tokens_per_second']:.1f} tokens/s at {self.width} rows, measured "
                f"{self.measured_at} on {self.machine['cpu_model']}, {self.machine['cores']} cores"
                + (f"; {others}" if others else "") + busy + ")")

    @property
    def busy_share(self) -> float:
        """Other work's share of the cores: measured while the probe ran, else read from the load
        average as it started (this process not counted where it can be measured)."""
        if self.other_work_share is not None:
            return self.other_work_share
        return self.load_average[0] / self.machine["cores"]

    @property
    def was_busy(self) -> bool:
        """Other work held the cores while the paths were timed: the ranking may be wrong."""
        return self.busy_share > BUSY_SHARE


def calibration_dir() -> FilePath:
    if os.environ.get(CALIBRATION_ENV):
        return FilePath(os.environ[CALIBRATION_ENV]).expanduser()
    import platformdirs

    return FilePath(platformdirs.user_cache_dir("seed-tot")) / "calibration"


def width_bucket(rows: int) -> int:
    """The probe width for a run that decodes about `rows` rows at once."""
    return next((w for w in WIDTHS if w >= rows), WIDTHS[-1])


def target_id(target: str) -> str:
    """Which weights a measurement was made on: a default alias's GGUF checksum, else the path's
    size and modification time (a changed file is measured again), else the name itself."""
    from seed_tot.models.registry import ALIASES

    if target in ALIASES:
        return ALIASES[target].sha256[:16]
    path = FilePath(target).expanduser()
    if path.exists():
        stat = path.stat()
        return hashlib.sha256(f"{path.resolve()}|{stat.st_size}|{stat.st_mtime_ns}".encode()).hexdigest()[:16]
    return hashlib.sha256(target.encode()).hexdigest()[:16]


def calibration_file(target: str, width: int, int8_allowed: bool) -> FilePath:
    key = f"{identity_key(machine_identity())}-{target_id(target)}-w{width}" + ("-int8" if int8_allowed else "")
    return calibration_dir() / f"{key}.json"


def cached_calibration(target: str, width: int, int8_allowed: bool = False) -> Calibration | None:
    path = calibration_file(target, width, int8_allowed)
    if not path.is_file():
        return None
    try:
        record = Calibration.model_validate_json(path.read_text())
    except ValueError:
        return None  # an unreadable or older record is measured again
    return record if record.version == RECORD_VERSION and record.machine == machine_identity() else None


def candidate_paths(target: str, allow_int8: bool) -> list[RunPath]:
    """Every path that can run `target` on this CPU: in process in bfloat16 and float32 (float16 only
    where the CPU computes it natively: elsewhere it is emulated and can overflow), with int8 layers
    where allowed and exact here, and llama.cpp for a GGUF target where it is installed. llama.cpp
    (no bound: its kernels are its own, and it loads fastest) comes first, then the paths that read
    fewer bytes a step, so a 16-bit path whose products are emulated here, and float32 (the slowest
    to load), can be left out by their rooflines once a faster path is measured."""
    from seed_tot.models.loading import cpu_supports_fp16
    from seed_tot.runtime.int8_linear import int8_works

    paths = [RunPath(ENGINE_METHOD)] if runs_on_llama_cpp(target) else []
    paths += [RunPath(IN_PROCESS_METHOD, dtype) for dtype in ("bfloat16", *(["float16"] if cpu_supports_fp16() else []))]
    if allow_int8 and int8_works():
        paths += [RunPath(IN_PROCESS_METHOD, dtype, int8=True) for dtype in ("bfloat16", "float32")]
    return paths + [RunPath(IN_PROCESS_METHOD, "float32")]


def fastest(timings: list[Timing]) -> Timing:
    return max(timings, key=lambda t: t.tokens_per_second)


def timing_row(timing: Timing | None, path: RunPath, error: str | None = None) -> dict:
    row = {"label": path.label, "method": path.method, "dtype": path.dtype, "int8": path.int8}
    if timing is None:
        return row | {"error": error}
    return row | {"tokens": timing.tokens, "seconds": round(timing.seconds, 3),
                  "tokens_per_second": round(timing.tokens_per_second, 2),
                  "load_seconds": round(timing.load_seconds, 2), "rounds": timing.rounds, "error": None}


def implied_bandwidth(bound: Callable, target: str, timing: Timing, width: int) -> float:
    """The bandwidth a measured path must at least have read at (its speed over its bound at 1 GB/s):
    a noisy bandwidth reading never bounds a path below a speed already seen."""
    per_gb_s = bound(target, timing.path, width, 1.0)
    return timing.tokens_per_second / per_gb_s if per_gb_s else 0.0


def path_bounds(target: str, path: RunPath, width: int, timings: list[Timing], bandwidth: float, bound: Callable,
                compute: Callable) -> tuple[float | None, float, float | None, int]:
    """(bandwidth bound, the bandwidth it assumes, compute bound, width) of a path not yet timed;
    the bandwidth is the reading or, where higher, what a measured path must have read at."""
    reads_at = max([bandwidth, *(implied_bandwidth(bound, target, t, width) for t in timings)])
    return bound(target, path, width, reads_at), reads_at, compute(target, path, width), width


def roofline_below(best: Timing, by_bandwidth: float | None, reads_at: float, by_compute: float | None,
                   width: int) -> str | None:
    """Why a path cannot beat `best` (its lower bound is well below best's measured speed), else None."""
    reasons = []
    if by_bandwidth is not None:
        reasons.append((by_bandwidth, f"its weights read at {reads_at:.1f} GB/s allow at most {by_bandwidth:.1f} tokens/s"))
    if by_compute is not None:
        reasons.append((by_compute, f"its products here allow at most {by_compute:.1f} tokens/s"))
    if not reasons:
        return None
    ceiling, why = min(reasons)
    if ceiling * ROOFLINE_MARGIN >= best.tokens_per_second:
        return None
    return f"{why} at {width} rows, well below {best.path.label}'s measured {best.tokens_per_second:.1f}"


def calibrate(target: str, width: int, allow_int8: bool = False, echo: Callable[[str], None] = lambda _: None,
              timer: Callable[[str, RunPath, int], Timing] | None = None,
              bound: Callable[[str, RunPath, int, float], float | None] | None = None,
              compute: Callable[[str, RunPath, int], float | None] | None = None) -> Calibration:
    """Time every candidate path at `width` rows (with `timer`, default time_path), except one whose
    roofline (the lower of its bandwidth `bound` and its `compute` bound) is below a speed already
    measured, choose the fastest, and cache the record."""
    timer, bound, compute = timer or time_path, bound or speed_bound, compute or compute_bound
    width = width_bucket(width)
    load, other_work, bandwidth = load_average(), OtherWork(), read_bandwidth_gb_s()
    timings, rows, errors = [], [], []
    for path in candidate_paths(target, allow_int8):
        best = fastest(timings) if timings else None
        reason = best and roofline_below(best, *path_bounds(target, path, width, timings, bandwidth, bound, compute))
        if reason:
            rows.append(timing_row(None, path) | {"skipped": reason})
            echo(f"not timing {path.label}: {reason}")
            continue
        echo(f"calibrating {path.label} at {width} rows ...")
        try:
            timing = timer(target, path, width)
        except SeedTotError as exc:  # a path that cannot start here is written down, not chosen
            rows.append(timing_row(None, path, str(exc)))
            errors.append(exc)
            echo(f"  cannot run here: {exc}")
            continue
        timings.append(timing)
        rows.append(timing_row(timing, path))
        echo(f"  {timing.tokens_per_second:.1f} tokens/s ({timing.tokens} tokens in {timing.seconds:.1f} s)")
    if not timings:
        raise errors[0]  # e.g. the models are not pulled: the first path's own sentence says what to do
    best = fastest(timings).path
    record = Calibration(
        target=target, target_id=target_id(target), width=width, new_tokens=NEW_TOKENS, max_rounds=ROUNDS,
        machine=machine_identity(), machine_key=identity_key(machine_identity()),
        bandwidth_gb_s=bandwidth, load_average=load,
        other_work_share=other_work.share(machine_identity()["cores"]), measured_at=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        int8_allowed=allow_int8, timings=rows,
        chosen={"method": best.method, "dtype": best.dtype, "int8": best.int8, "label": best.label})
    write_json_atomically(calibration_file(target, width, allow_int8), record.model_dump(mode="json"))
    return record
