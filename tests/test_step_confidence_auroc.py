"""scripts/step_confidence_auroc.py: a chain's states at its line breaks, their confidence features,
and the step AUROC on rows where one feature separates right from wrong states."""

import random

import pytest
import torch
from script_helpers import load_script

steps = load_script("step_confidence_auroc")


def offsets_of(pieces: list[str]) -> tuple[str, list[tuple[int, int]]]:
    text, offsets = "", []
    for piece in pieces:
        offsets.append((len(text), len(text) + len(piece)))
        text += piece
    return text, offsets


def test_states_end_at_each_line_break_before_the_chain_ends():
    text, offsets = offsets_of(["Step", " one", "\n", "Step", " two", "\n", "\n", "The answer", " is 3"])
    assert steps.step_ends(text, offsets) == [2, 5]  # no empty step for the blank line; none at the end
    assert steps.step_ends(*offsets_of(["\n", "a", "b"])) == []  # a leading break ends no step
    assert steps.step_ends(*offsets_of(["one line only"])) == []


def test_state_features_summarise_each_step_and_what_came_before():
    logprob = torch.tensor([-0.1, -0.3, -2.0, -0.2, -0.4])
    rows = steps.state_features(logprob, torch.full((5,), 0.5), torch.full((5,), 1.5), [2, 4])
    assert rows[0]["step_mean_logprob"] == pytest.approx(-0.2)
    assert rows[1]["step_mean_logprob"] == pytest.approx(-1.1)
    assert rows[1]["prefix_mean_logprob"] == pytest.approx(-0.65)
    assert rows[1]["step_min_logprob"] == pytest.approx(-2.0)
    assert rows[1]["weakest_step_logprob"] == pytest.approx(-1.1)
    assert rows[0]["step_mean_top1"] == 0.5 and rows[0]["step_neg_entropy"] == -1.5


def test_a_feature_that_separates_the_states_reaches_the_gate_and_noise_does_not():
    rng = random.Random(0)
    rows = []
    for problem in range(20):
        for chain in range(6):
            correct = chain % 2 == 0
            for step in range(1, 4):
                row = {name: rng.gauss(0, 1) for name in steps.FEATURES}
                row["step_mean_logprob"] = (1.0 if correct else -1.0) + rng.gauss(0, 0.3)
                rows.append({"problem_id": f"p{problem}", "chain_index": chain, "step": step, "correct": correct, **row})
    found = dict(steps.measure(rows))
    assert found["step_mean_logprob"] > 0.95
    assert abs(found["step_mean_top1"] - 0.5) < 0.15
    assert found["logistic on all six, L2 0.1 (out of fold)"] > 0.9
    assert "passes the gate" in steps.report(rows, list(found.items()), "cmd")
    noise = [{**row, "step_mean_logprob": rng.gauss(0, 1)} for row in rows]
    assert "fails the gate" in steps.report(noise, steps.measure(noise), "cmd")


def test_the_stored_table_is_what_the_stored_states_give():
    stored = steps.ROOT / "results" / "value-gsm8k" / "step_confidence"
    text = stored.with_suffix(".md").read_text()
    command = text.split("Command: `", 1)[1].split("`", 1)[0]
    rows = steps.read_rows(stored.with_suffix(".jsonl.gz"))
    assert steps.report(rows, steps.measure(rows), command) == text
