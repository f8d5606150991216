import os

import pytest
import torch

from devices import TEST_DEVICE
from seed_tot.models.tiny import build_tiny_pair
from seed_tot.runtime import ModelRunner

torch.set_num_threads(1)


@pytest.fixture(scope="session")
def tiny_pair():
    """(draft_runner, target_runner) of the tiny float32 pair with the byte tokenizer, on TEST_DEVICE."""
    draft, target, tokenizer = build_tiny_pair(seed=0)
    return (
        ModelRunner(draft.to(TEST_DEVICE), tokenizer, "tiny-draft"),
        ModelRunner(target.to(TEST_DEVICE), tokenizer, "tiny-target"),
    )


@pytest.fixture(scope="session")
def tiny_eager_pair():
    draft, target, tokenizer = build_tiny_pair(seed=0, attn_implementation="eager")
    return ModelRunner(draft, tokenizer, "tiny-draft"), ModelRunner(target, tokenizer, "tiny-target")


def real_models_enabled() -> bool:
    return os.environ.get("SEED_TOT_REAL_MODELS") == "1"


def requires_real_models(test):
    """Marks a test `real` (pytest -m real selects them) and skips it unless SEED_TOT_REAL_MODELS=1."""
    skip = pytest.mark.skipif(not real_models_enabled(), reason="set SEED_TOT_REAL_MODELS=1 after `seed-tot models pull`")
    return pytest.mark.real(skip(test))
