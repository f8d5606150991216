"""Answer rules that use the evaluator's values (seed_tot/observe/rerank.py), by hand, and
scripts/rerank_pool.py on a GSM8K pool: rating with a tiny target, resuming, and the report."""

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from script_helpers import load_script

from seed_tot.analysis.reranking import weighted_vote_credit
from seed_tot.observe.rerank import best_chain_credit, expected_credit



def test_the_highest_valued_answering_chain_answers_and_ties_split():
    assert best_chain_credit([("7", 0.2), ("8", 0.9), (None, 5.0), ("7", None)], {"7"}) == 0.0
    assert best_chain_credit([("7", 0.9), ("8", 0.9)], {"7"}) == 0.5
    assert best_chain_credit([(None, 1.0)], {"7"}) == 0.0


def test_the_weighted_vote_sums_values_per_answer():
    chains = [("7", 0.4), ("7", 0.4), ("8", 0.7), (None, 9.0)]
    assert weighted_vote_credit(chains, {"7"}) == 1.0  # 0.8 against 0.7, though 8 has the best chain
    assert best_chain_credit(chains, {"7"}) == 0.0
    assert weighted_vote_credit([("7", 0.5), ("8", 0.5)], {"8"}) == 0.5


def test_the_values_power_runs_from_the_plain_vote_to_best_of_k():
    chains = [("7", 0.4), ("7", 0.4), ("8", 0.7), (None, 9.0)]
    assert weighted_vote_credit(chains, {"7"}, power=0) == 1.0  # two votes against one
    assert weighted_vote_credit(chains, {"7"}, power=1) == 1.0  # 0.8 against 0.7
    assert weighted_vote_credit(chains, {"7"}, power=2) == 0.0  # 0.32 against 0.49: the best chain's answer


def test_expected_credit_is_the_mean_over_every_subset():
    chains = [("7", 0.9), ("8", 0.5), ("8", 0.1)]
    # pairs: {7,8a} -> 7, {7,8b} -> 7, {8a,8b} -> 8: 2/3
    assert expected_credit(best_chain_credit, chains, {"7"}, 2) == pytest.approx(2 / 3)
    # weighted: {7,8a} 0.9 vs 0.5 -> 7; {7,8b} -> 7; {8a,8b} -> 8: 2/3; all three: 0.9 vs 0.6 -> 7
    assert expected_credit(weighted_vote_credit, chains, {"7"}, 3) == 1.0
    assert expected_credit(best_chain_credit, chains, {"7"}, 1) == pytest.approx(1 / 3)
    with pytest.raises(ValueError, match="outside 1..3"):
        expected_credit(best_chain_credit, chains, {"7"}, 4)


def write_pool(folder: Path, rows) -> None:
    with (folder / "cot_samples.jsonl").open("w") as handle:
        for problem_id, gold, answers in rows:
            handle.write(json.dumps({
                "problem_id": problem_id, "question": "Tom has 3 apples and buys 4 more. How many now?",
                "gold": gold, "samples": [f"He buys more apples. The answer is {a}." for a in answers],
                "finish_reasons": ["eos"] * len(answers), "sample_token_counts": [10] * len(answers),
                "sample_indices": list(range(1, len(answers) + 1)),
                "greedy": "The answer is 7.", "greedy_finish_reason": "eos", "greedy_token_count": 5,
                "settings": {"task": "gsm8k", "samples": len(answers)}}) + "\n")


def test_the_report_pairs_best_of_k_with_the_vote_on_stored_values(tmp_path):
    write_pool(tmp_path, [("pool-1", "7", ["8", "8", "7", "9"]), ("pool-2", "7", ["7", "7", "6", "5"])])
    values = {("pool-1", 3): 0.9, ("pool-2", 1): 0.8}
    with (tmp_path / "chain_values.jsonl").open("w") as handle:
        for pid in ("pool-1", "pool-2"):
            for index in range(1, 5):
                handle.write(json.dumps({"problem_id": pid, "sample_index": index,
                                         "value": values.get((pid, index), 0.1), "prompt_tokens": 100}) + "\n")
    result = CliRunner().invoke(load_script("rerank_pool").main, [str(tmp_path)])
    assert result.exit_code == 0, result.output
    rows = {line.split(" | ")[0]: line.split(" | ") for line in result.output.splitlines() if line.startswith("| ")}
    # K=4: the vote answers 8 (wrong) and 7 (right); the best chain is right on both problems
    assert rows["| 4"][1:4] == ["1.00/2", "2.00/2", "+50.0% [+0.0%, +100.0%]"]
    # K=1: every rule answers with the one chain drawn: 1/4 + 2/4
    assert rows["| 1"][1] == rows["| 1"][2] == "0.75/2"
    # correct chains valued 0.9, 0.8, 0.1 against five wrong ones at 0.1: (5 + 5 + 2.5) / 15
    assert "AUROC on the 8 answering chains (value against correct): 0.833" in result.output
    # within pool-1: 0.9 against 0.1, 0.1, 0.1 -> 1; within pool-2: (0.8, 0.1) against (0.1, 0.1) -> 0.75
    assert "mean over the 2 problems with right and wrong chains): 0.875" in result.output


def test_scoring_rates_each_chain_once_and_resumes(tmp_path, monkeypatch):
    from seed_tot_tasks.gsm8k import Gsm8kTask
    # the tiny byte tokenizer gives " sure", " likely" and " impossible" one first token (a space);
    # a prefix ending in its own space lets the words' first letters tell them apart
    monkeypatch.setattr(Gsm8kTask, "verdict_prefix", "Verdict: ")
    write_pool(tmp_path, [("pool-1", "7", ["8", "7"]), ("pool-2", "7", ["7", "6"])])
    script = load_script("rerank_pool")
    arguments = [str(tmp_path), "--score", "--target", "tiny-target", "--dtype", "float32", "--per-call", "1"]
    result = CliRunner().invoke(script.main, arguments)
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in (tmp_path / "chain_values.jsonl").read_text().splitlines()]
    assert sorted((r["problem_id"], r["sample_index"]) for r in rows) == [
        ("pool-1", 1), ("pool-1", 2), ("pool-2", 1), ("pool-2", 2)]
    assert all(0.0 < r["value"] <= 20.0 and r["prompt_tokens"] > 0 for r in rows)
    assert all(r["settings"]["value_mode"] == "logits" and r["settings"]["dtype"] == "float32" for r in rows)
    again = CliRunner().invoke(script.main, arguments)
    assert again.exit_code == 0, again.output
    assert len((tmp_path / "chain_values.jsonl").read_text().splitlines()) == 4  # nothing rated twice
    assert "| 2 |" in again.output


def test_vote_weight_cv_values_each_training_chain_by_a_head_that_never_saw_its_problem(tmp_path):
    import torch

    from seed_tot.observe.paired_stats import expected_vote_accuracy
    from seed_tot.training.value.store import FeatureStore

    generator = torch.Generator().manual_seed(0)
    answers = {f"gsm8k-train-{n}": [["7", "8", "8", "9"], ["7", "7", "8", "6"]][n % 2] for n in range(1, 13)}
    write_pool(tmp_path, [(pid, "7", chains) for pid, chains in answers.items()])
    settings = {"target": "tiny", "target_fingerprint": "x", "dtype": "float32", "layers": [1], "feature_rule": "r"}
    store = FeatureStore(tmp_path / "train" / "features-float32", settings)
    rows, features = [], []
    for pid, chains in answers.items():
        for index, answer in enumerate(chains, 1):
            rows.append({"problem_id": pid, "chain_index": index, "states": 1, "correct": answer == "7"})
            signal = 2.0 if answer == "7" else -2.0  # the feature tells right chains from wrong ones
            features.append(torch.tensor([signal, 0.0, 0.0, 0.0]) + 0.3 * torch.randn(4, generator=generator))
    store.append(rows, torch.stack(features)[:, None, :])
    chosen = {"layer": 1, "l2": 0.1, "scope": "final"}
    (tmp_path / "train" / "fit_report.json").write_text(json.dumps({"chosen": chosen}))

    out = tmp_path / "cv"
    result = CliRunner().invoke(load_script("vote_weight_cv").main, [
        str(tmp_path / "train"), "--pool", str(tmp_path), "--samples", "4", "--ks", "2,4", "--resamples", "200",
        "--out", str(out)])
    assert result.exit_code == 0, result.output
    found = {(r["k"], r["power"]): r for r in json.loads(out.with_suffix(".json").read_text())["rows"]}
    assert found[(4, 1.0)]["minus_power_1"] == 0.0 and found[(4, 1.0)]["problems"] == 12
    plain = sum(expected_vote_accuracy(chains, {"7"}, 2) for chains in answers.values())
    assert found[(2, 0.0)]["correct"] == pytest.approx(plain, abs=0.01)  # power 0: the plain vote
    assert found[(4, 8.0)]["correct"] == 12.0 > found[(4, 0.0)]["correct"]  # a judge that knows picks the one 7
    assert "| 4 | 8 | 12.00/12 |" in out.with_suffix(".md").read_text()
