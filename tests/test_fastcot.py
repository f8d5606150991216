"""FastCoT: exact prefix, approximate window, trigger placement, cap, EOS, convergence check."""

import pytest
import torch

from seed_tot.config import DecodeConfig
from seed_tot.decoding.fastcot import answer_finished, cut_at_eos, fastcot_at_caps, fastcot_decode
from seed_tot.errors import ConfigError
from test_jacobi import prompt_cases, reference_greedy, with_eos

TRIGGER = " So the answer is"


def reference_answer(target, context: list[int], max_tokens: int) -> list[int]:
    """Greedy answer by full recomputation (no cache), with FastCoT's answer stop rule."""
    answer: list[int] = []
    while True:
        answer.append(int(target.forward(torch.tensor([context + answer]))[0, -1].argmax()))
        if answer[-1] in target.eos_token_ids or answer_finished(target.decode(answer)):
            return answer
        if len(answer) >= max_tokens:
            return answer


def check_structure(target, prompt, out, max_answer_tokens):
    trigger = target.encode(TRIGGER)
    assert out.trigger_ids == trigger
    assert out.token_ids == out.exact_ids + out.approximate_ids + trigger + out.answer_ids
    start = len(out.exact_ids) + len(out.approximate_ids)
    assert out.token_ids[start : start + len(trigger)] == trigger  # after exact AND approximate tokens
    context = prompt + out.exact_ids + out.approximate_ids + trigger
    assert out.answer_ids == reference_answer(target, context, max_answer_tokens)


@pytest.mark.parametrize("window,cap", [(4, 3), (8, 5), (2, 8)])
def test_cap_exact_prefix_and_trigger_after_approximate_tokens(tiny_pair, window, cap):
    target = tiny_pair[1]
    config = DecodeConfig(max_new_tokens=200)
    for prompt, _ in prompt_cases(4, seed=31):
        out = fastcot_decode(target, prompt, config, window=window, max_iterations=cap, max_answer_tokens=6)
        assert out.stopped_by == "cap" and out.iterations == cap
        assert cap <= len(out.exact_ids) <= cap * (window + 1)
        greedy, _ = reference_greedy(target, prompt, config)
        assert out.exact_ids == greedy[: len(out.exact_ids)]  # the exact part is greedy AR
        assert len(out.approximate_ids) <= window  # empty when the whole window converged
        check_structure(target, prompt, out, 6)
        assert out.stats.target_forwards >= cap + 1  # prefill + iterations + answer
        assert out.stats.new_tokens == len(out.exact_ids) + len(out.approximate_ids) + len(out.answer_ids)


def test_eos_before_cap_answers_after_the_whole_rationale(tiny_pair):
    target = tiny_pair[1]
    for prompt, _ in prompt_cases(4, seed=32):
        free, _ = reference_greedy(target, prompt, DecodeConfig(max_new_tokens=30))
        eos_runner = with_eos(target, free[6])
        expected, reason = reference_greedy(eos_runner, prompt, DecodeConfig(max_new_tokens=30))
        assert reason == "eos"
        out = fastcot_decode(eos_runner, prompt, DecodeConfig(max_new_tokens=30), window=4, max_iterations=50)
        assert out.stopped_by == "eos" and out.iterations < 50
        assert out.exact_ids == expected[:-1]  # the EOS itself is dropped before the trigger
        assert out.approximate_ids == []
        check_structure(eos_runner, prompt, out, 16)


def test_rationale_budget_ends_iterations_like_ar(tiny_pair):
    target = tiny_pair[1]
    prompt = list(b"Question: 2 + 3?\nAnswer:")
    out = fastcot_decode(target, prompt, DecodeConfig(max_new_tokens=10), window=4, max_iterations=100)
    expected, _ = reference_greedy(target, prompt, DecodeConfig(max_new_tokens=10))
    assert out.stopped_by == "length" and out.exact_ids == expected and out.approximate_ids == []
    check_structure(target, prompt, out, 16)


def test_window_zero_is_autoregressive_chain_of_thought(tiny_pair):
    target = tiny_pair[1]
    prompt = list(b"Think step by step.")
    out = fastcot_decode(target, prompt, DecodeConfig(max_new_tokens=100), window=0, max_iterations=7)
    expected, _ = reference_greedy(target, prompt, DecodeConfig(max_new_tokens=100))
    assert out.exact_ids == expected[:7] and out.approximate_ids == []


@pytest.mark.parametrize("check_every", [1, 2])
def test_convergence_check_stops_at_first_repeated_answer(tiny_pair, check_every):
    target = tiny_pair[1]
    converged = 0
    for prompt, _ in prompt_cases(6, seed=33):
        out = fastcot_decode(
            target, prompt, DecodeConfig(max_new_tokens=200), window=4, max_iterations=40,
            check_every=check_every, check_answer_tokens=2, max_answer_tokens=6,
        )
        attempts = out.answer_attempts
        assert len(attempts) == out.iterations // check_every
        assert all(a != b for a, b in zip(attempts[:-2], attempts[1:-1]))  # no earlier repetition
        if out.stopped_by == "converged":
            converged += 1
            assert attempts[-1] == attempts[-2] and out.iterations % check_every == 0
            assert out.answer_ids[: len(attempts[-1])] == attempts[-1]  # the final answer extends it
        else:
            assert out.stopped_by == "cap" and out.iterations == 40 and attempts[-1] != attempts[-2]
        check_structure(target, prompt, out, 6)
    if check_every == 1:
        assert 0 < converged < 6  # on this model some prompts converge, others reach the cap


def test_caps_from_one_trajectory_equal_separate_runs(tiny_pair):
    target = tiny_pair[1]
    config = DecodeConfig(max_new_tokens=40)
    for prompt, _ in prompt_cases(3, seed=34):
        results = fastcot_at_caps(target, prompt, config, caps=[8, 2, 4, 64], window=4, max_answer_tokens=6)
        assert [r.cap for r in results] == [2, 4, 8, 64]
        for result in results:
            single = fastcot_decode(target, prompt, config, window=4, max_iterations=result.cap, max_answer_tokens=6)
            assert result.output.token_ids == single.token_ids
            assert result.output.iterations == single.iterations
            assert result.output.stats.target_forwards == single.stats.target_forwards
            assert result.wall_seconds > 0


def test_helpers_and_settings(tiny_pair):
    assert cut_at_eos([5, 6, 256, 7], frozenset({256})) == [5, 6]
    assert answer_finished(" 42\n") and not answer_finished("\n\n") and not answer_finished(" 42")
    with pytest.raises(ConfigError, match="greedy-only"):
        fastcot_decode(tiny_pair[1], [1, 2], DecodeConfig(temperature=0.5))
    with pytest.raises(ConfigError, match="FastCoT settings"):
        fastcot_decode(tiny_pair[1], [1, 2], DecodeConfig(), max_iterations=0)


def test_choose_cap_picks_smallest_within_loss():
    from seed_tot.fastcot_calibration import choose_cap

    report = {"ar": {"accuracy": 0.5}, "fastcot": {"4": {"accuracy": 0.3}, "8": {"accuracy": 0.49}, "16": {"accuracy": 0.5}}}
    assert choose_cap(report, 0.02) == 8
    assert choose_cap(report, 0.0) == 16
    assert choose_cap({"ar": {"accuracy": 1.0}, "fastcot": {"4": {"accuracy": 0.0}}}, 0.02) is None


def test_calibrate_command_on_tiny_model(tmp_path):
    import json

    from click.testing import CliRunner

    from seed_tot.cli import main

    output = tmp_path / "calibration.json"
    args = ["fastcot", "calibrate", "--tiny", "--limit", "2", "--caps", "4,2", "--max-cot-tokens", "16",
            "--max-answer-tokens", "3", "--window", "4", "--output", str(output)]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    report = json.loads(output.read_text())
    assert set(report["fastcot"]) == {"2", "4"} and report["chosen_cap"] in (2, 4)
    assert report["fastcot"]["2"]["mean_iterations"] <= 2 and len(report["ar"]["answers"]) == 2
    assert "FastCoT cap 2" in result.output
    bad = CliRunner().invoke(main, ["fastcot", "calibrate", "--tiny", "--caps", "0"])
    assert bad.exit_code == 2 and "Bad --caps" in bad.output


def test_calibrate_resumes_from_its_records(tmp_path, monkeypatch):
    """A rerun with the same records file recomputes nothing and reports the same numbers."""
    import json

    from click.testing import CliRunner

    import seed_tot.fastcot_calibration as calibration
    from seed_tot.cli import main

    output = tmp_path / "calibration.json"
    args = ["fastcot", "calibrate", "--tiny", "--limit", "2", "--caps", "2", "--max-cot-tokens", "8",
            "--max-answer-tokens", "2", "--window", "2", "--output", str(output)]
    assert CliRunner().invoke(main, args).exit_code == 0
    first = json.loads(output.read_text())
    assert len((tmp_path / "calibration.json.records.jsonl").read_text().splitlines()) == 2

    def must_not_run(*_args, **_kwargs):
        raise AssertionError("a recorded problem was recomputed")

    monkeypatch.setattr(calibration, "fastcot_problem_record", must_not_run)
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    second = json.loads(output.read_text())
    assert second["ar"] == first["ar"] and second["fastcot"] == first["fastcot"]
    # other settings are a different unit: computed, not mixed in
    other = CliRunner().invoke(main, [*args[:-4], "--window", "3", "--output", str(output)])
    assert other.exit_code == 1 and "recomputed" in str(other.exception)
