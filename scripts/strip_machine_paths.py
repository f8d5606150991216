"""Rewrite the absolute machine paths in the stored files once, to paths a reader can use.

The files under results/, the packaged judge heads and docs/ were written on the build machine,
so they named its folders: the checkout (`/work/main/...`, other worktrees of it), its virtual
environment's python, the user cache (`/root/.cache/seed-tot/...`) and scratch folders outside the
repository. This rewrites each to what it means anywhere:

- a file of the checkout (or of another worktree of it) -> its path in the repository
  (`tasks/data/gsm8k/test.jsonl`, `runs/quality-gsm8k/traces/gsm8k-1.json`);
- the virtual environment's `python` / `seed-tot` -> `python` / `seed-tot`, its site-packages ->
  `site-packages/...`, the system python's standard library -> `lib/python3.N/...`;
- the model cache -> `~/.cache/seed-tot/...` (the default cache folder on Linux);
- a scratch or temporary folder outside the repository (`/work/scratch/x`, `/tmp/x`) -> the same
  folder named relative to where the command ran (`scratch/x`, `x`);

and, where a record names a data file by a bare path (a judge head's `train_data`, a fit
report's `data`), adds the sha256 of that data file beside it (`train_data_sha256`).

Plain text files are rewritten in place; `.gz` files are decompressed, rewritten and compressed
again with `gzip -9n` (no name, no time stamp: the way results/ stores its traces, so the same
content gives the same bytes); `.safetensors` heads get their header's metadata rewritten, the
tensor bytes untouched.

    python scripts/strip_machine_paths.py            # rewrite, print what changed
    python scripts/strip_machine_paths.py --check    # only list the files that still name a machine path
"""

from __future__ import annotations

import gzip
import hashlib
import json
import re
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import click

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = ("results", "seed_tot", "docs", "README.md", "tasks", "prompts")  # what a clone or the wheel ships to a reader
CHECKOUTS = r"/work/(?:main|wt-[\w.-]+)"  # the checkout and the worktrees of it that wrote files

# Absolute paths a shipped file may name: the defaults of scripts/gpu_check.sh, which docs/gpu.md
# documents (its output folder and where it installs wheels on the GPU machine).
ALLOWED = {
    "/tmp/gpu_check_out": "scripts/gpu_check.sh's default output folder",
    "/tmp/site": "where scripts/gpu_check.sh installs the wheels it carries",
}
_NOT_ALLOWED = "(?!" + "|".join(re.escape(a.removeprefix("/tmp/")) + r"(?![\w.-])" for a in ALLOWED) + ")"

# A machine path: an absolute path under a folder that only the build machine has. System tool
# paths every Linux machine has (/usr/bin/time, /proc/..., /dev/...) are not machine paths.
MACHINE_PATH = re.compile(
    r"(?<![\w.~/\-+])/(?:(?:work|root|home|Users|mnt|opt|srv|scratch|var/tmp|usr/lib|usr/local)/|tmp/" + _NOT_ALLOWED + ")"
    r"[^\s\"'`,;)\]\\]*"
)

# (pattern, replacement) in order: the more specific first.
RULES: tuple[tuple[re.Pattern, str], ...] = tuple((re.compile(p), r) for p, r in (
    (CHECKOUTS + r"/\.venv/bin/(python3?|seed-tot|pip)\b", r"\1"),
    (CHECKOUTS + r"/\.venv/lib/python3\.\d+/site-packages/", "site-packages/"),
    (r"(?<![\w.~/\-+])/usr/(?:local/)?lib/(python3\.\d+)/", r"lib/\1/"),
    (r"(?<![\w.~/\-+])/root/\.cache/", "~/.cache/"),
    (CHECKOUTS + r"/", ""),
    (CHECKOUTS + r"(?![\w.-])", "."),
    (r"(?<![\w.~/\-+])/work/", ""),
    (r"(?<![\w.~/\-+])/tmp/" + _NOT_ALLOWED, ""),
))

# Keys of JSON records that name a data file by a bare path; the sha256 goes beside them.
DATA_KEYS = ("train_data", "data")
DATA_VALUE = re.compile(r'"(' + "|".join(DATA_KEYS) + r')": "(tasks/data/[^"]+)"(?!, "\1_sha256")')


def rewrite_text(text: str) -> str:
    """`text` with every machine path replaced by its portable name (see the module's docstring)."""
    for pattern, replacement in RULES:
        text = pattern.sub(replacement, text)
    return text


def file_sha256(repo_path: str, root: Path = ROOT) -> str | None:
    """The sha256 of the repository's file `repo_path`, None where the repository has no such file."""
    path = root / repo_path
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None


def add_data_hashes(text: str, root: Path = ROOT) -> str:
    """JSON text with `"KEY_sha256": ...` added after each `"KEY": "tasks/data/..."` (KEY in
    DATA_KEYS) that has none yet and names a file the repository holds."""
    def replace(match: re.Match) -> str:
        digest = file_sha256(match.group(2), root)
        return match.group(0) if digest is None else f'{match.group(0)}, "{match.group(1)}_sha256": "{digest}"'
    return DATA_VALUE.sub(replace, text)


def rewrite_head_metadata(meta: dict, root: Path = ROOT) -> dict:
    """A judge head's metadata with its paths portable and its training data's sha256 beside it."""
    out = json.loads(rewrite_text(json.dumps(meta)))
    if isinstance(out.get("train_data"), str) and "train_data_sha256" not in out:
        digest = file_sha256(out["train_data"], root)
        if digest:
            out["train_data_sha256"] = digest
    return out


def safetensors_header(data: bytes) -> tuple[dict, bytes]:
    """A safetensors file's header and the tensor bytes after it."""
    size = struct.unpack("<Q", data[:8])[0]
    return json.loads(data[8:8 + size]), data[8 + size:]


def with_safetensors_header(header: dict, body: bytes) -> bytes:
    """A safetensors file of `header` and `body`, the header padded with spaces to 8 bytes as
    the safetensors writer does (offsets are relative to the body, so they stay valid)."""
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + body


def rewrite_head(data: bytes, root: Path = ROOT) -> bytes:
    """A seed-tot head file (`.safetensors`) with each metadata entry's paths made portable."""
    header, body = safetensors_header(data)
    metadata = header.get("__metadata__") or {}
    changed = {}
    for key, value in metadata.items():
        try:
            inner = json.loads(value)
        except json.JSONDecodeError:
            changed[key] = rewrite_text(value)
            continue
        changed[key] = json.dumps(rewrite_head_metadata(inner, root)) if isinstance(inner, dict) else rewrite_text(value)
    if changed == metadata:
        return data
    return with_safetensors_header({**header, "__metadata__": changed}, body)


def gzip_bytes(data: bytes) -> bytes:
    """`data` compressed the way results/ stores its files: `gzip -9n` (no name, no time stamp);
    Python's gzip at level 9 with time stamp 0 where no gzip program is installed."""
    if shutil.which("gzip"):
        return subprocess.run(["gzip", "-9n"], input=data, capture_output=True, check=True).stdout
    return gzip.compress(data, compresslevel=9, mtime=0)


def shipped_text(path: Path, data: bytes) -> str | None:
    """The text a shipped file holds (a `.gz` decompressed, a head's header), None for other binaries."""
    if path.suffix == ".gz":
        data = gzip.decompress(data)
    elif path.suffix == ".safetensors":
        return json.dumps(safetensors_header(data)[0])
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def rewritten(path: Path, data: bytes, root: Path = ROOT) -> bytes:
    """The bytes `path` should hold with its machine paths rewritten (`data` itself where none)."""
    if path.suffix == ".safetensors":
        return rewrite_head(data, root)
    packed = path.suffix == ".gz"
    raw = gzip.decompress(data) if packed else data
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return data
    new = rewrite_text(text)
    if path.name.removesuffix(".gz").endswith((".json", ".jsonl")):
        new = add_data_hashes(new, root)
    if new == text:
        return data
    return gzip_bytes(new.encode("utf-8")) if packed else new.encode("utf-8")


def machine_paths(text: str) -> list[str]:
    """The machine paths `text` names, in order."""
    return MACHINE_PATH.findall(text)


def shipped_files(root: Path = ROOT) -> list[Path]:
    """The tracked files under SHIPPED (what a clone of the repository holds there)."""
    listed = subprocess.run(["git", "-C", str(root), "ls-files", "-z", "--", *SHIPPED],
                            capture_output=True, check=True).stdout.decode().split("\0")
    return [root / name for name in listed if name and (root / name).is_file()]


@click.command()
@click.option("--check", is_flag=True, help="Only list the files that still name a machine path.")
def main(check: bool) -> None:
    files = shipped_files()
    changed = left = 0
    for path in files:
        data = path.read_bytes()
        if not check:
            new = rewritten(path, data)
            if new != data:
                path.write_bytes(new)
                changed += 1
                click.echo(f"rewrote {path.relative_to(ROOT)}")
                data = new
        text = shipped_text(path, data)
        found = machine_paths(text) if text is not None else []
        if found:
            left += 1
            click.echo(f"{path.relative_to(ROOT)}: {', '.join(sorted(set(found))[:5])}")
    click.echo(f"{len(files)} files, {changed} rewritten, {left} still naming a machine path")
    sys.exit(1 if check and left else 0)


if __name__ == "__main__":
    main()
