"""The disk side of a model pull (seed_tot/models/pull.py): a full disk reported in one sentence
that says what to do, and a model folder replaced in one rename, never left half written."""

from __future__ import annotations

import errno
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from seed_tot.errors import SeedTotError
from seed_tot.models.registry import DefaultModel

TEMP_PREFIX = ".tmp-"


class DiskFullError(SeedTotError):
    pass


def free_bytes(directory: Path) -> int:
    return shutil.disk_usage(directory).free


def _is_disk_full(exc: BaseException) -> bool:
    if isinstance(exc, OSError) and exc.errno == errno.ENOSPC:
        return True
    # safetensors (Rust) reports a full disk as its own error type with the OS message inside.
    text = str(exc)
    return "No space left on device" in text or "StorageFull" in text or "os error 28" in text


def disk_full_message(model: DefaultModel, root: Path) -> str:
    return (
        f"The disk holding {root} is full while pulling {model.alias}: free a few GB there "
        "(or pass --cache-dir on a larger disk), then re-run `seed-tot models pull`, which resumes."
    )


@contextmanager
def translate_disk_full(model: DefaultModel, root: Path) -> Iterator[None]:
    """Turn a full-disk error from anywhere inside into one DiskFullError sentence."""
    try:
        yield
    except SeedTotError:
        raise
    except Exception as exc:
        if _is_disk_full(exc):
            raise DiskFullError(disk_full_message(model, root)) from exc
        raise


def remove_stale_temp_dirs(root: Path, model: DefaultModel) -> None:
    """Temp dirs left by an interrupted save of this model."""
    for stale in root.glob(f"{TEMP_PREFIX}{model.alias}-*"):
        shutil.rmtree(stale, ignore_errors=True)


@contextmanager
def atomic_directory(final: Path) -> Iterator[Path]:
    """Yield a temp dir beside `final`; on success it replaces `final` in one rename."""
    final.parent.mkdir(parents=True, exist_ok=True)
    temp = Path(tempfile.mkdtemp(prefix=f"{TEMP_PREFIX}{final.name}-", dir=final.parent))
    try:
        temp.chmod(0o777 & ~_current_umask())  # mkdtemp makes it private (0700); a model dir is not
        yield temp
        if final.exists():
            old = final.with_name(f"{TEMP_PREFIX}{final.name}-old")
            shutil.rmtree(old, ignore_errors=True)
            final.rename(old)
            temp.rename(final)
            shutil.rmtree(old, ignore_errors=True)
        else:
            temp.rename(final)
    finally:
        if temp.exists():
            shutil.rmtree(temp, ignore_errors=True)


def _current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
