"""GSM8K: data loading, gold parsing, final-answer extraction, rating parsing, the task contract."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest

from seed_tot.errors import SeedTotError
from tasks import TASK_NAMES, get_task
from tasks.base import Task
from tasks.gsm8k import (
    DEFAULT_PATH,
    Gsm8kTask,
    extract_number_answer,
    find_final_answer,
    first_step,
    normalise_number,
    split_steps,
)
from tasks.values import parse_rating


@pytest.fixture(scope="module")
def problems():
    return Gsm8kTask().load()


def test_all_1319_gold_answers_parse(problems):
    assert len(problems) == 1319
    raw = [json.loads(line) for line in DEFAULT_PATH.read_text(encoding="utf-8").splitlines()]
    for problem, row in zip(problems, raw, strict=True):
        expected = row["answer"].rsplit("#### ", 1)[1].strip().replace(",", "")
        assert Decimal(problem.gold) == Decimal(expected), problem.id
    assert problems[0].gold == "18" and problems[2].gold == "70000"
    assert len({p.id for p in problems}) == 1319


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("She makes 9 * 2 = 18 dollars a day. The answer is 18.", "18"),
        ("The answer is $18.", "18"),
        ("So she makes $18", "18"),
        ("18 dollars", "18"),
        ("Janet sells 16 - 3 - 4 = 9 eggs.\n#### 18", "18"),
        ("Therefore the total is \\boxed{18}.", "18"),
        ("The total is \\boxed{\\$18 \\text{ dollars}}", "18"),
        ("The answer is 1,234 apples.", "1234"),
        ("The answer is -3.", "-3"),
        ("The final answer is: **2.50**", "2.5"),
        ("The answer is 12. Wait, I made an error. The answer is 14.", "14"),
        ("Sub-answer: 16 - 3 - 4 = 9 eggs remain.", "9"),
        ("The answer to the question is 42", "42"),
        ("9*2 = 18 so the answer is 18", "18"),
        ("No numbers here.", None),
    ],
)
def test_extract_number_answer_on_model_style_outputs(text, expected):
    assert extract_number_answer(text) == expected


def test_declared_answer_is_not_confused_with_a_sub_answer():
    assert find_final_answer("Sub-question: How many eggs are left?\nSub-answer: 16 - 3 - 4 = 9.") is None
    assert find_final_answer("Sub answer: 9") is None
    assert find_final_answer("Sub-answer: 9 * 2 = 18. The answer is 18.") == "18"


def test_normalise_number():
    assert normalise_number("2.50") == normalise_number("2.5") == "2.5"
    assert normalise_number("1,234") == "1234" and normalise_number("18.00") == "18"
    assert normalise_number("\u22123") == "-3" and normalise_number("abc") is None
    assert normalise_number("inf") is None and normalise_number("NaN") is None


def test_score_is_numeric_equality(problems):
    task = Gsm8kTask()
    problem = problems[0]  # gold 18
    assert task.score(problem, "18") == 1.0
    assert task.score(problem, "18.0") == 1.0
    assert task.score(problem, "$18 dollars") == 1.0
    assert task.score(problem, "17") == 0.0
    assert task.score(problem, None) == 0.0
    assert task.score(problem, "none") == 0.0


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("Score: 7", 7.0),
        ("7/10 - the step is correct.", 7.0),
        ("I'd rate it 8 out of 10.", 8.0),
        ("8\nThe sub-answer computes the eggs correctly.", 8.0),
        ("The number is: **9**. It directly helps.", 9.0),
        ("Thus the coherency score is 6", 6.0),
        ("Rating: 7.5", 7.5),
        ("Score: 0", None),
        ("I give it 11/10!", None),
        ("Score: 15", None),
        ("The step is helpful.", None),
        ("The number of eggs is 9, which is helpful.", None),
        ("", None),
    ],
)
def test_parse_value(text, value):
    assert Gsm8kTask().parse_value(text) == value


def test_parse_rating_prefer_last():
    text = "Score: 3 for the first paragraph.\nThus the coherency score is 8"
    assert parse_rating(text) == 3.0 and parse_rating(text, prefer_last=True) == 8.0


def test_thoughts_extend_the_state_one_step_at_a_time(problems):
    task = Gsm8kTask()
    problem = problems[0]
    thought = (
        "Sub-question: How many eggs are left to sell?\nSub-answer: 16 - 3 - 4 = 9 eggs.\n"
        "Sub-question: How much money?\nSub-answer: 9 * 2 = 18. The answer is 18."
    )
    assert first_step(thought) == "Sub-question: How many eggs are left to sell?\nSub-answer: 16 - 3 - 4 = 9 eggs."
    state = task.extend_state("", thought, 0)
    assert state == first_step(thought)
    assert not task.is_terminal(problem, state, 0)
    assert task.extract_answer(problem, state) == "9"  # best effort: no answer declared yet
    # Small models end intermediate sub-answers with "The answer is N" too: that is not the end.
    second = "**Sub-question:** How much does she make per egg?\nSub-answer: $2 per egg. The answer is 2."
    state = task.extend_state(state, second, 1)
    assert len(split_steps(state)) == 2
    assert not task.is_terminal(problem, state, 1)
    assert task.extract_answer(problem, state) == "2"
    closing = (
        "Sub-question: Now we can answer the question: how much does she make?\n"
        "Sub-answer: 9 * 2 = $18. The answer is 18."
    )
    state = task.extend_state(state, closing, 2)
    assert len(split_steps(state)) == 3 and task.is_terminal(problem, state, 2)
    assert task.extract_answer(problem, state) == "18"
    assert task.score(problem, task.extract_answer(problem, state)) == 1.0


def test_prompts_fill_every_field(problems):
    task = Gsm8kTask()
    problem = problems[0]
    state = (
        "Sub-question: How many eggs are left?\nSub-answer: 9.\n"
        "Sub-question: How much money?\nSub-answer: 18 dollars."
    )
    first = task.thought_prompt(problem, "", 0)
    assert problem.question in first and "(none yet)" in first and "{" not in first
    middle = task.thought_prompt(problem, state, 1)
    assert "Sub-answer: 9." in middle and "Now answer the question itself" not in middle
    assert "Now answer the question itself" in task.thought_prompt(problem, state, 3)
    assert "Now answer the question itself" in Gsm8kTask(depth=2).thought_prompt(problem, state, 1)
    value = task.value_prompt(problem, state, 1)
    previous, newest = value.split("The new sub-question and sub-answer are:")
    assert "How many eggs are left?" in previous and "How much money?" in newest and "How many eggs" not in newest
    assert value.rstrip().endswith("The number is:")


def test_malformed_rows_name_the_file_and_line(tmp_path):
    path = tmp_path / "mine.jsonl"
    good = json.dumps({"question": "1+1?", "answer": "1+1=2\n#### 2"})
    path.write_text(good + "\n" + json.dumps({"question": "2+2?", "answer": "four"}) + "\n")
    with pytest.raises(SeedTotError, match=r"mine\.jsonl, line 2: .*#### <number>"):
        Gsm8kTask().load(path)
    path.write_text(good + "\n\n" + '{"question": "x"}\n')
    with pytest.raises(SeedTotError, match=r"line 3: expected a JSON object with the keys question, answer"):
        Gsm8kTask().load(path)
    path.write_text("[1, 2\n")
    with pytest.raises(SeedTotError, match=r"line 1: not valid JSON"):
        Gsm8kTask().load(path)
    with pytest.raises(SeedTotError, match="does not exist"):
        Gsm8kTask().load(tmp_path / "missing.jsonl")
    path.write_text(good + "\n" + json.dumps({"question": "3+3?", "answer": 6, "id": "six"}) + "\n")
    loaded = Gsm8kTask().load(path)
    assert [(p.id, p.gold) for p in loaded] == [("gsm8k-1", "2"), ("six", "6")]


def test_get_task_names_and_unknown_name():
    assert TASK_NAMES == ("gsm8k", "creative_writing", "blocksworld")
    assert isinstance(get_task("gsm8k"), Task) and get_task("GSM8K").name == "gsm8k"
    assert get_task("creative-writing").name == get_task("creative_writing").name == "creative_writing"
    with pytest.raises(SeedTotError, match="Unknown task 'chess': choose one of gsm8k, creative_writing, blocksworld"):
        get_task("chess")
