"""scripts/judge_pool.py measures a head file alone on a pool of test chains, and refuses a pool
that holds a problem the head was trained on."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from value_heads import tiny_value_head

from seed_tot.models.loading import load_model

SCRIPTS = Path(__file__).resolve().parent.parent / "scripts"


def script(name: str, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPTS / name), *args], capture_output=True, text=True, timeout=300,
                          cwd=cwd)


@pytest.mark.slow
def test_a_head_file_is_measured_on_a_pool_without_its_training_folder(tmp_path):
    pool = tmp_path / "pool"
    made = script("add_cot_samples.py", str(pool), "--task", "gsm8k", "--limit", "2", "--samples", "2",
                  "--per-call", "2", "--target", "tiny", cwd=tmp_path)
    assert made.returncode == 0, made.stderr[-2000:]
    head = tiny_value_head(load_model("tiny-target", dtype="float32"), tmp_path / "head.safetensors")

    measured = script("judge_pool.py", str(pool), "--head", str(head), "--samples", "2", "--report",
                      str(tmp_path / "report"), cwd=tmp_path)
    assert measured.returncode == 0, measured.stderr[-2000:]
    found = json.loads((tmp_path / "report.json").read_text())
    assert found["head_id"] == "tiny-head" and found["read_dtype"] == "float32" and found["learning_curve"] == []
    assert found["heldout"]["problems"] == 2 and found["heldout"]["chains"] == 2 * 3
    assert list((tmp_path / "runs" / "judge-features").iterdir())  # the readings are kept for the next run

    # the same pool against a head that says it trained on one of these problems
    trained = json.loads((pool / "cot_samples.jsonl").read_text().splitlines()[0])["problem_id"]
    from seed_tot.values.head import load_head

    leaky = load_head(head)
    leaky.meta["train_problem_ids"] = [trained]
    leaky.save(tmp_path / "leaky.safetensors")
    refused = script("judge_pool.py", str(pool), "--head", str(tmp_path / "leaky.safetensors"), cwd=tmp_path)
    assert refused.returncode != 0 and "trained on" in refused.stderr
