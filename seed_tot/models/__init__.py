"""Model loading, the default pair's registry and the tiny test pair (imported lazily: the
registry alone must not pull in torch + transformers, so `seed-tot models pull` on a filled
cache stays fast)."""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "DEFAULT_DRAFT": "seed_tot.models.registry",
    "DEFAULT_MODELS": "seed_tot.models.registry",
    "DEFAULT_TARGET": "seed_tot.models.registry",
    "cache_root": "seed_tot.models.registry",
    "build_tiny_pair": "seed_tot.models.tiny",
    "check_pair": "seed_tot.models.loading",
    "load_model": "seed_tot.models.loading",
    "load_pair": "seed_tot.models.loading",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'seed_tot.models' has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)
