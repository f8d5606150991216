"""The synthetic arithmetic corpus (deterministic, correct, disjoint splits) and pretraining on it
(resumes exactly, saves a model load_model accepts)."""

import json
from dataclasses import replace

import pytest
import torch

from seed_tot.analysis.arithmetic_corpus import (
    ANSWER_MARK, TEMPLATES, disjoint_split, final_answer, make_problem, make_split, solution_steps, step_is_correct,
)
from seed_tot.analysis.pretrain import LOG_FILE, STATE_FILE, PretrainSettings, batch_tensors, pretrain
from seed_tot.config import DecodeConfig
from seed_tot.decoding.autoregressive import autoregressive_decode
from seed_tot.errors import ConfigError
from seed_tot.models.loading import load_model


def test_problems_are_a_pure_function_of_seed_and_index():
    assert make_split(7, 40) == make_split(7, 40)
    assert make_split(7, 10, start=30) == make_split(7, 40)[30:]
    assert make_split(7, 40) != make_split(8, 40)  # negative control: the seed matters


def test_every_step_and_the_answer_line_are_correct():
    problems = make_split(3, 400)
    for p in problems:
        steps = solution_steps(p.solution)
        assert len(steps) >= 2 and all(step_is_correct(*step) for step in steps), p.text
        assert steps[-1][3] == p.answer and final_answer(p.completion) == p.answer
        assert p.text.startswith("Q: ") and p.text.endswith(f"\n{ANSWER_MARK}{p.answer}\n")
        for a, _, b, _ in steps[:1]:
            assert str(a) in p.question and str(b) in p.question  # the first step uses the question's numbers
    # every template occurs, and each chains its steps (a later step uses an earlier result)
    kinds = ["bags of", "gives away", "boxes with", "shares", "packs of"]
    assert len(kinds) == len(TEMPLATES) and all(any(k in p.question for p in problems) for k in kinds)
    assert all(solution_steps(p.solution)[1][0] == solution_steps(p.solution)[0][3]
               or solution_steps(p.solution)[1][2] == solution_steps(p.solution)[0][3] for p in problems)


def test_the_checks_catch_wrong_arithmetic():  # negative controls for the checks above
    assert not step_is_correct(4, "*", 12, 49) and not step_is_correct(7, "/", 2, 3)
    assert step_is_correct(4, "*", 12, 48) and step_is_correct(8, "/", 2, 4)
    wrong = make_problem(3, 0).completion.replace(ANSWER_MARK + str(make_problem(3, 0).answer), ANSWER_MARK + "1234")
    assert final_answer(wrong) == 1234 and final_answer("no answer line") is None


def test_disjoint_split_excludes_given_questions():
    train = make_split(5, 300)
    overlapping = disjoint_split(5, 50, [])  # same seed, nothing excluded: the training problems again
    assert {p.question for p in overlapping} & {p.question for p in train}  # negative control
    held_out = disjoint_split(5, 50, train)
    assert len(held_out) == 50 and not {p.question for p in held_out} & {p.question for p in train}
    assert len({p.question for p in held_out}) == 50
    assert disjoint_split(6, 50, train) == disjoint_split(6, 50, train)


def test_batch_tensors_pad_on_the_right_and_mask_the_labels():
    ids, mask, labels = batch_tensors([[1, 2, 3], [4]], pad=9)
    assert ids.tolist() == [[1, 2, 3], [4, 9, 9]] and mask.tolist() == [[1, 1, 1], [1, 0, 0]]
    assert labels.tolist() == [[1, 2, 3], [4, -100, -100]]


TINY = PretrainSettings(layers=1, hidden=32, intermediate=64, heads=2, kv_heads=1, steps=6, batch_size=4, lr=3e-3,
                        warmup=2, save_every=3)


class Stop(Exception):
    pass


def final_weights(out):
    return torch.load(out / STATE_FILE, weights_only=True)["model"]


def test_pretraining_resumes_exactly_and_saves_a_loadable_model(tmp_path):
    texts = [p.text for p in make_split(1, 24)]
    pretrain(texts, tmp_path / "a", TINY)

    def interrupt(step, model):
        raise Stop

    with pytest.raises(Stop):
        pretrain(texts, tmp_path / "b", TINY, on_save=interrupt)  # stops after saving step 3
    halfway = final_weights(tmp_path / "b")
    with open(tmp_path / "b" / LOG_FILE, "a") as log:
        log.write(json.dumps({"step": 4, "loss": 0.0}) + "\n")  # logged after the last save, then stopped
    resumed = load_model(str(pretrain(texts, tmp_path / "b", TINY)), dtype="float32", device="cpu")
    log = [json.loads(line) for line in (tmp_path / "b" / LOG_FILE).read_text().splitlines()]
    assert [row["step"] for row in log] == [1, 2, 3, 4, 5, 6]
    assert log[-1]["loss"] < log[0]["loss"]
    straight = final_weights(tmp_path / "a")
    for name, value in resumed.model.state_dict().items():
        assert torch.allclose(straight[name], value, atol=1e-6), name
    assert not torch.allclose(straight["lm_head.weight"], halfway["lm_head.weight"])  # negative control
    prompt = make_problem(9, 0).prompt
    assert resumed.decode(resumed.encode(prompt)) == prompt
    out = autoregressive_decode(resumed, resumed.encode(prompt), DecodeConfig(max_new_tokens=5))
    assert len(out.token_ids) == 5
    with pytest.raises(ConfigError, match="other settings"):
        pretrain(texts, tmp_path / "a", replace(TINY, lr=1e-3))
    with pytest.raises(ConfigError, match="other settings"):
        pretrain(texts, tmp_path / "a", replace(TINY, steps=4))  # shorter is not an extension
    pretrain(texts + [p.text for p in make_split(1, 8, start=24)], tmp_path / "a", replace(TINY, steps=8))
    assert [json.loads(line)["step"] for line in (tmp_path / "a" / LOG_FILE).read_text().splitlines()] == list(range(1, 9))
    record = json.loads((tmp_path / "a" / "pretrain_settings.json").read_text())
    assert record["history"] == [{"steps": 6, "texts": 24, "extended_to": [8, 32]}]
