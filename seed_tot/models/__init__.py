"""Model loading, the default pair's registry and the tiny test pair (imported lazily: the
registry alone must not pull in torch + transformers, so `seed-tot models pull` on a filled
cache stays fast)."""

from __future__ import annotations

import importlib
from typing import Any

# The public names, by the module that defines them (imported on first use).
_MODULES = {
    "seed_tot.models.registry": ("DEFAULT_DRAFT", "DEFAULT_MODELS", "DEFAULT_TARGET", "cache_root"),
    "seed_tot.models.tiny": ("build_tiny_pair",),
    "seed_tot.models.loading": ("check_pair", "load_model", "load_pair"),
}
_EXPORTS = {name: module for module, names in _MODULES.items() for name in names}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'seed_tot.models' has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)
