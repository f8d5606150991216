"""scripts/blocksworld_blind_expectation.py: the blind tree's solve rate per instance over its seeds,
paired with the model-guided run."""

import pytest
from script_helpers import load_script

expectation = load_script("blocksworld_blind_expectation")


def test_each_instances_blind_rate_is_the_share_of_the_seeds_that_hold_it_and_solved_it():
    runs = [{("a", 6): True, ("b", 6): False}, {("a", 6): True, ("b", 6): True}, {("a", 6): False}]
    rates = expectation.blind_rates(runs, [("a", 6), ("b", 6), ("c", 8)])
    assert rates == {("a", 6): (pytest.approx(2 / 3), 3), ("b", 6): (0.5, 2)}  # c: no blind run holds it


def test_the_model_is_paired_with_the_blind_expectation_on_the_instances_both_hold():
    model = {("a", 6): True, ("b", 6): True, ("c", 8): False}
    rates = {("a", 6): (0.5, 2), ("b", 6): (1.0, 2)}
    row = expectation.comparison("all", model, rates, resamples=200)
    assert row["n"] == 2 and row["model_solved"] == 2 and row["blind_expected"] == 1.5
    assert row["model_minus_blind"] == pytest.approx(0.25)
    assert row["ci95"][0] <= 0.25 <= row["ci95"][1]


def test_a_seed_table_reads_back_as_one_blind_run_per_seed_and_writes_the_same_bytes(tmp_path):
    table = load_script("blocksworld_blind_table")
    rows = [{"seed": 4, "problem_id": "a", "optimal": 6, "solved": True},
            {"seed": 3, "problem_id": "a", "optimal": 6, "solved": False},
            {"seed": 3, "problem_id": "b", "optimal": 8, "solved": True}]
    table.write_table(rows, tmp_path / "t.jsonl.gz")
    table.write_table(rows, tmp_path / "again.jsonl.gz")
    assert (tmp_path / "t.jsonl.gz").read_bytes() == (tmp_path / "again.jsonl.gz").read_bytes()
    assert table.table_runs(tmp_path / "t.jsonl.gz") == [{("a", 6): False, ("b", 8): True}, {("a", 6): True}]
