"""scripts/judge_head_variants.py: both heads find a signal the features carry, out of fold."""

import torch
from script_helpers import load_script

from seed_tot.training.value.store import FeatureStore

variants = load_script("judge_head_variants")


def _store(tmp_path) -> FeatureStore:
    """10 problems x 4 chains x 2 states; feature 0 of every state says whether its chain is right."""
    store = FeatureStore(tmp_path / "store", {"layers": [3]})
    generator = torch.Generator().manual_seed(0)
    rows, features = [], []
    for problem in range(10):
        for chain in range(4):
            correct = chain % 2 == 0
            rows.append({"problem_id": f"p-{problem}", "chain_index": chain, "correct": correct, "states": 2})
            state = torch.randn(2, 1, 8, generator=generator)
            state[:, 0, 0] += 3.0 if correct else -3.0
            features.append(state)
    store.append(rows, torch.cat(features))
    return store


def test_both_heads_find_the_signal_out_of_fold(tmp_path):
    table = _store(tmp_path).table()
    for kind in ("point", "pair"):
        chain, step = variants.cross_validated(table, kind, 3, 1.0, "all")
        assert chain > 0.9 and step > 0.9, kind
    assert variants.cross_validated(table, "point", "cat", 1.0, "final")[0] > 0.9


def test_chain_pooling_reads_each_chain_whole_and_finds_the_signal(tmp_path):
    pooling = load_script("judge_chain_pooling_cv")
    table = _store(tmp_path).table()
    means = pooling.chain_means(table, 0)
    first_chain = table.features[table.chains == 0][:, 0].float().mean(0)
    assert torch.allclose(means[0], first_chain)
    rows = pooling.pooling_rows(table, [1.0])
    assert {r["reads"] for r in rows} == {"final", "mean", "final+mean", "final, logits summed"}
    assert all(r["chain_cv"] > 0.9 for r in rows)
