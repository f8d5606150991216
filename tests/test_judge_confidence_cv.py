"""scripts/judge_confidence_cv.py: per-chain confidence features, the target's token confidence, and the
cross-validated comparison on rows where confidence carries what the judge misses."""

import math
import random

import pytest
import torch
from script_helpers import load_script

from seed_tot.models.loading import load_model

confidence = load_script("judge_confidence_cv")


def test_chain_features_summarise_the_tokens():
    logprob = torch.tensor([-0.1] * 40 + [-2.0] * 32 + [-0.1] * 8)
    found = confidence.chain_confidence(logprob, torch.full((80,), 0.5), torch.full((80,), 1.5))
    assert found["mean_logprob"] == pytest.approx(float(logprob.mean()))
    assert found["weakest_stretch_logprob"] == pytest.approx(-2.0)  # the 32 weak tokens together
    assert found["tail_logprob"] == pytest.approx((24 * -2.0 + 8 * -0.1) / 32)
    assert found["mean_top1"] == 0.5 and found["mean_neg_entropy"] == -1.5
    assert found["neg_sqrt_length"] == pytest.approx(-math.sqrt(80))
    short = confidence.chain_confidence(torch.tensor([-1.0, -3.0]), torch.ones(2), torch.zeros(2))
    assert short["weakest_stretch_logprob"] == short["mean_logprob"] == -2.0


def test_token_confidence_is_the_targets_distribution_over_the_reply():
    target = load_model("tiny-target", dtype="float32")
    prompt, reply = [5, 6, 7], [8, 9, 10, 11]
    written, top1, entropy = confidence.token_confidence(target, prompt, reply)
    logits = target.forward(torch.tensor([prompt + reply]))[0].float()
    for k, token in enumerate(reply):
        logp = torch.log_softmax(logits[len(prompt) - 1 + k], -1)
        assert written[k] == pytest.approx(float(logp[token]), abs=1e-5)
        assert top1[k] == pytest.approx(float(logp.exp().max()), abs=1e-5)
        assert entropy[k] == pytest.approx(float(-(logp.exp() * logp).sum()), abs=1e-4)


def test_a_judge_that_misses_what_confidence_sees_gains_from_it():
    rng = random.Random(0)
    rows, judge = [], {}
    for problem in range(30):
        for index in range(6):
            right = index % 2 == 0
            seen_by_judge = index < 3  # the judge knows the first three chains, confidence the rest
            judge[(f"p{problem}", index)] = (1.0 if right else -1.0) * (seen_by_judge * 2.0) + rng.gauss(0, 0.3)
            signal = (1.0 if right else -1.0) * (not seen_by_judge) * 2.0
            rows.append({"problem_id": f"p{problem}", "chain_index": index, "correct": right,
                         **{name: signal + rng.gauss(0, 0.3) for name in confidence.CONFIDENCE}})
    found = dict(confidence.comparison(rows, judge, l2s=(0.1,)))
    assert found["logistic on judge + confidence, L2 0.1"] > max(found["learned judge (out of fold)"],
                                                               found["logistic on confidence, L2 0.1"]) + 0.1


def test_a_head_fit_on_every_training_row_scores_held_out_chains():
    rng = random.Random(1)

    def rows_and_logits(prefix: str, count: int):
        rows, logit = [], {}
        for n in range(count):
            for index in range(4):
                right = index < 2
                logit[(f"{prefix}{n}", index)] = rng.gauss(0, 1)  # a judge that knows nothing
                rows.append({"problem_id": f"{prefix}{n}", "chain_index": index, "correct": right,
                             **{name: (1.0 if right else -1.0) + rng.gauss(0, 0.3) for name in confidence.CONFIDENCE}})
        return rows, logit

    train, train_logit = rows_and_logits("t", 20)
    test, test_logit = rows_and_logits("h", 5)
    scores = confidence.fit_and_score(train, train_logit, test, test_logit, 0.1)
    right = [s for s, r in zip(scores.tolist(), test) if r["correct"]]
    wrong = [s for s, r in zip(scores.tolist(), test) if not r["correct"]]
    assert min(right) > max(wrong)
    assert confidence.best_l2([("logistic on judge + confidence, L2 0.1", 0.7),
                               ("logistic on judge + confidence, L2 1.0", 0.8), ("mean_top1", 0.9)]) == 1.0
