"""The evaluator-quality simulation: best-of-K reranking of recorded chains under a binormal
evaluator of given AUROC, against exact values at its two ends (a coin and a perfect judge)."""

import json
import math
import random

import pytest
from click.testing import CliRunner
from script_helpers import load_script

from seed_tot.analysis.evaluator_needed import (
    Draw,
    break_even_auroc,
    draw_subsets,
    oracle_accuracy,
    rerank_accuracy,
    rerank_correct,
    separation_for_auroc,
)



def test_separation_gives_back_its_auroc():
    for auroc in (0.55, 0.7, 0.95):
        d = separation_for_auroc(auroc)
        # AUROC of N(d,1) against N(0,1) = Phi(d / sqrt 2)
        assert 0.5 * (1 + math.erf(d / 2)) == pytest.approx(auroc)
    assert separation_for_auroc(0.5) == 0.0
    with pytest.raises(ValueError, match="strictly between 0 and 1"):
        separation_for_auroc(1.0)


def test_a_chain_that_does_not_answer_is_never_chosen():
    assert not rerank_correct(Draw((None, False), (9.0, 0.0)), 0.0)
    assert rerank_correct(Draw((None, True), (9.0, 0.0)), 0.0)
    assert not rerank_correct(Draw((None, None), (0.0, 0.0)), 5.0)


def test_a_coin_picks_a_correct_chain_at_the_pools_rate_and_a_perfect_judge_whenever_one_is_drawn():
    labels = [True, False, False, None, True, False]
    rng = random.Random(1)
    problems = [draw_subsets(labels, 3, 20_000, rng)]
    # coin: the expected share of correct chains among the answering ones of a 3-subset, by enumeration
    from itertools import combinations
    subsets = list(combinations(labels, 3))
    coin = sum(sum(s is True for s in sub) / max(1, sum(s is not None for s in sub)) for sub in subsets) / len(subsets)
    assert rerank_accuracy(problems, 0.5) == pytest.approx(coin, abs=0.01)
    assert rerank_accuracy(problems, 0.99999) == pytest.approx(oracle_accuracy(labels, 3), abs=0.005)
    assert oracle_accuracy(labels, 3) == pytest.approx(1 - math.comb(4, 3) / math.comb(6, 3))


def test_accuracy_rises_with_auroc_and_the_break_even_reaches_the_target():
    rng = random.Random(2)
    pools = [[True, False, False, False, None], [False, False, True, True, False], [False] * 5]
    problems = [draw_subsets(labels, 4, 3_000, rng) for labels in pools]
    accuracies = [rerank_accuracy(problems, a) for a in (0.5, 0.6, 0.7, 0.8, 0.9)]
    assert accuracies == sorted(accuracies) and accuracies[-1] > accuracies[0] + 0.1
    target = rerank_accuracy(problems, 0.75)
    needed = break_even_auroc(problems, target)
    assert needed == pytest.approx(0.75, abs=0.01)
    assert break_even_auroc(problems, 0.0) == 0.5
    assert break_even_auroc(problems, 0.9) is None  # the third problem never has a correct chain


def test_the_script_compares_with_the_vote_over_the_same_chains(tmp_path):
    rows = [("pool-1", "7", ["7", "8", "8", "9"]), ("pool-2", "7", ["7", "7", "5", "6"])]
    with (tmp_path / "cot_samples.jsonl").open("w") as handle:
        for problem_id, gold, answers in rows:
            handle.write(json.dumps({
                "problem_id": problem_id, "question": "What is 3 + 4?", "gold": gold,
                "samples": [f"Adding them up gives the total. The answer is {a}." for a in answers], "finish_reasons": ["eos"] * 4,
                "sample_token_counts": [10] * 4, "sample_indices": [1, 2, 3, 4],
                "greedy": "The answer is 7.", "greedy_finish_reason": "eos", "greedy_token_count": 5,
                "settings": {"task": "gsm8k", "samples": 4}}) + "\n")
    result = CliRunner().invoke(load_script("evaluator_needed").main, [str(tmp_path), "--draws", "400", "--auroc", "0.9"])
    assert result.exit_code == 0, result.output
    lines = {line.split(" | ")[0]: line for line in result.output.splitlines() if line.startswith("| ")}
    # K=4: problem 1 votes 8 (wrong), problem 2 votes 7 (right): 50%; a perfect reranker gets both
    k4 = lines["| 4"].split(" | ")
    assert k4[1] == "50.0%" and k4[3] == "100.0%"
    assert "2 problems, 4 sampled chains" in result.output
