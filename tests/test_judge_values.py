"""The judge's stored values (scripts/judge_values.py): a state table's values written as one row
per chain read back to the same measurements, byte for byte the same file for the same rows."""

import torch

from seed_tot.analysis.judge_values import (chain_values, pool_name, read_value_rows, value_rows, value_table,
                                            values_path, write_value_rows)
from seed_tot.training.value.fit import StateTable, judge_metrics


def table() -> tuple[StateTable, torch.Tensor]:
    """Two problems; chains of 3, 1, 2 and 2 states; chain index 0 is the greedy chain."""
    problems = ["p1"] * 6 + ["p2"] * 4
    chains = torch.tensor([0, 0, 0, 1, 2, 2, 3, 3, 4, 4])
    index = torch.tensor([0, 0, 0, 1, 2, 2, 0, 0, 1, 1])
    labels = torch.tensor([True] * 3 + [False] + [True] * 2 + [False] * 2 + [True] * 2)
    final = torch.tensor([False, False, True, True, False, True, False, True, False, True])
    probs = torch.tensor([0.5, 0.6, 0.9, 0.2, 0.4, 0.7, 0.3, 0.1, 0.5, 0.8])
    return StateTable(torch.zeros(10, 1, 2), labels, problems, chains, final, (14,), index), probs


def test_the_rows_read_back_give_the_same_measurements(tmp_path):
    states, probs = table()
    rows = value_rows(states, probs, out_of_fold=False)
    assert [(r["problem_id"], r["chain_index"], len(r["states"])) for r in rows] == [
        ("p1", 0, 3), ("p1", 1, 1), ("p1", 2, 2), ("p2", 0, 2), ("p2", 1, 2)]
    assert rows[0]["value"] == 0.9 and rows[0]["states"] == [0.5, 0.6, 0.9]
    path = tmp_path / "pool.jsonl.gz"
    write_value_rows(path, rows)
    first = path.read_bytes()
    write_value_rows(path, read_value_rows(path))
    assert path.read_bytes() == first  # no time stamp: the same rows, the same bytes
    back, back_probs = value_table(read_value_rows(path))
    assert judge_metrics(back_probs, back) == judge_metrics(probs, states)


def test_samples_keep_the_greedy_chain_and_the_first_samples():
    states, probs = table()
    rows = value_rows(states, probs, out_of_fold=True)
    assert chain_values(rows, samples=1) == {("p1", 0): 0.9, ("p1", 1): 0.2, ("p2", 0): 0.1, ("p2", 1): 0.8}
    kept, kept_probs = value_table(rows, samples=1)
    assert len(kept.labels) == len(kept_probs) == 8 and int(kept.final.sum()) == 4


def test_a_pool_is_named_by_its_folder(tmp_path):
    from pathlib import Path

    assert pool_name(Path("results/heldout-gsm8k-161-220/cot-pool")) == "heldout-gsm8k-161-220"
    assert pool_name(Path("results/value-gsm8k/train-pool")) == "value-gsm8k-train-pool"
    assert values_path(tmp_path, Path("x/cot-pool")) == tmp_path / "x.jsonl.gz"
