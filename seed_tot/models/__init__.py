from seed_tot.models.loading import check_pair, load_model, load_pair
from seed_tot.models.registry import DEFAULT_DRAFT, DEFAULT_MODELS, DEFAULT_TARGET, cache_root
from seed_tot.models.tiny import build_tiny_pair

__all__ = [
    "DEFAULT_DRAFT",
    "DEFAULT_MODELS",
    "DEFAULT_TARGET",
    "build_tiny_pair",
    "cache_root",
    "check_pair",
    "load_model",
    "load_pair",
]
