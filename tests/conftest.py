import os
import tempfile

import pytest
import torch

from devices import TEST_DEVICE
from seed_tot.models.tiny import DRAFT_NOISE, build_tiny_pair
from seed_tot.runtime import ModelRunner

torch.set_num_threads(1)
# No test reads or writes the user's cached path measurements (--method auto): each session,
# its subprocesses included, starts with an empty calibration folder of its own.
os.environ["SEED_TOT_CALIBRATION_DIR"] = tempfile.mkdtemp(prefix="seed-tot-calibration-")


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


SMALL_VOCAB = 8  # small enough to count every outcome of a few tokens


@pytest.fixture(scope="session")
def small_vocab_pair():
    """small_vocab_pair(seed=0, noise=DRAFT_NOISE) -> (draft_runner, target_runner): the tiny
    pair over an 8-token vocabulary without a tokenizer, for the statistics tests. Each (seed,
    noise) is built once per session; the target depends on the seed only, the noise sets how
    far the draft is from it (0.1: total variation ~0.3 at T=1)."""
    built: dict[tuple[int, float], tuple[ModelRunner, ModelRunner]] = {}

    def pair(seed: int = 0, noise: float = DRAFT_NOISE) -> tuple[ModelRunner, ModelRunner]:
        if (seed, noise) not in built:
            draft, target, _ = build_tiny_pair(seed=seed, vocab_size=SMALL_VOCAB, noise=noise)
            built[seed, noise] = (
                ModelRunner(draft, None, f"tiny-draft-v{SMALL_VOCAB}(seed={seed}, noise={noise})"),
                ModelRunner(target, None, f"tiny-target-v{SMALL_VOCAB}(seed={seed})"),
            )
        return built[seed, noise]

    return pair


def real_models_enabled() -> bool:
    return os.environ.get("SEED_TOT_REAL_MODELS") == "1"


def requires_real_models(test):
    """Marks a test `real` (pytest -m real selects them) and skips it unless SEED_TOT_REAL_MODELS=1."""
    skip = pytest.mark.skipif(not real_models_enabled(), reason="set SEED_TOT_REAL_MODELS=1 after `seed-tot models pull`")
    return pytest.mark.real(skip(test))


_SCRIPT_TEST_FILES: dict[str, bool] = {}


def _tests_a_script(path: str) -> bool:
    """A test file that imports a script of scripts/ (the measurement code, not the package)."""
    if path not in _SCRIPT_TEST_FILES:
        text = open(path, encoding="utf-8").read()
        _SCRIPT_TEST_FILES[path] = "load_script(" in text or "_scripts_on_path()" in text
    return _SCRIPT_TEST_FILES[path]


def pytest_collection_modifyitems(config, items):
    """Mark the tests of scripts/ `scripts`, so `-m "not slow and not scripts"` runs the package's
    own tests alone (the quick loop while developing; CI runs everything)."""
    for item in items:
        if _tests_a_script(str(item.fspath)):
            item.add_marker(pytest.mark.scripts)
