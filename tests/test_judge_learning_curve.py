"""scripts/judge_learning_curve.py: the log-linear fit, the n it reads off, and a run on stored features."""

import json
import math

import pytest
import torch
from click.testing import CliRunner
from script_helpers import load_script
from test_rerank import write_pool

from seed_tot.values.features import FEATURE_RULE
from seed_tot.values.head import ValueHead

curve = load_script("judge_learning_curve")


def test_the_fit_recovers_a_line_in_log_n_and_reads_off_the_goal():
    sizes = [16, 32, 64, 128]
    a, b = curve.log_fit(sizes, [0.6 + 0.02 * math.log(n) for n in sizes])
    assert (a, b) == (pytest.approx(0.6), pytest.approx(0.02))
    assert curve.problems_needed(a, b, 0.7) == pytest.approx(math.exp(5))
    assert curve.problems_needed(0.7, 0.0, 0.8) == math.inf  # a flat curve never gets there
    assert curve.problems_needed(0.0, 1e-6, 0.8) == math.inf  # nor does a nearly flat one (no overflow)


def test_a_measured_size_that_reaches_the_goal_is_the_answer():
    sizes = [8, 16, 32]
    auc = {(n, 0): {"p": mean, "q": mean} for n, mean in zip(sizes, (0.7, 0.85, 0.9))}
    assert curve.curve_fit(auc, sizes, ["p", "q"], 0.8, fit_from=16)["needed"] == 16
    assert curve.shown(math.inf, 16, 128) == "> 12,800" and curve.shown(3.2, 16, 128) == "< 16"


def test_a_run_on_stored_features_writes_a_row_per_pool(tmp_path):
    """Training features carry the outcome in feature 0; held-out chains of two pools are read back."""
    from seed_tot.training.value.store import FeatureStore

    generator = torch.Generator().manual_seed(0)
    settings = {"target": "tiny", "target_fingerprint": "x", "dtype": "float32", "layers": [1], "feature_rule": "r"}
    train_dir = tmp_path / "train"

    def feature(right: bool) -> torch.Tensor:
        return torch.tensor([2.0 if right else -2.0, 0.0, 0.0]) + 0.5 * torch.randn(3, generator=generator)

    rows, features = [], []
    for n in range(1, 21):
        for index in range(4):
            rows.append({"problem_id": f"gsm8k-train-{n}", "chain_index": index, "states": 1, "correct": index % 2 == 0})
            features.append(feature(index % 2 == 0))
    FeatureStore(train_dir / "features-float32", settings).append(rows, torch.stack(features)[:, None, :])
    ValueHead(layer=1, mean=torch.zeros(3), scale=torch.ones(3), weight=torch.ones(3), bias=0.0,
              meta={"l2": 0.1, "scope": "final", "train_problem_ids": [], "feature_rule": FEATURE_RULE}).save(train_dir / "value_head.safetensors")
    heldout = FeatureStore(train_dir / "heldout-features-float32", settings)
    specs = []
    for pool_name, first in (("a", 1), ("b", 5)):
        pool = tmp_path / pool_name
        pool.mkdir()
        ids = [f"pool-{n}" for n in range(first, first + 4)]
        write_pool(pool, [(pid, "7", ["7", "8", "7"]) for pid in ids])
        rows = [{"problem_id": pid, "chain_index": i, "states": 1, "correct": i in (0, 1, 3)} for pid in ids for i in range(4)]
        heldout.append(rows, torch.stack([feature(r["correct"]) for r in rows])[:, None, :])
        specs += ["--heldout", f"{pool}:3"]
    out = tmp_path / "curve"
    result = CliRunner().invoke(curve.main, [str(train_dir), *specs, "--sizes", "4,8,16", "--draws", "3",
                                             "--resamples", "50", "--out", str(out)])
    assert result.exit_code == 0, result.output
    found = json.loads(out.with_suffix(".json").read_text())
    assert found["sizes"] == [4, 8, 16, 20] and found["fit_from"] == 10
    assert [row["problems_with_both"] for row in found["heldout"].values()] == [4, 4, 8]
    assert all(row["needed"] == 4 for row in found["heldout"].values())  # a clear signal: reached at once
