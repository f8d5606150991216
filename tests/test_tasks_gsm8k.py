"""GSM8K: data loading, gold parsing, final-answer extraction, rating parsing, the task contract."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest

from seed_tot.errors import SeedTotError
from seed_tot_tasks import TASK_NAMES, get_task
from seed_tot_tasks.base import Task
from seed_tot_tasks.gsm8k import (
    DEFAULT_PATH,
    Gsm8kTask,
    extract_number_answer,
    find_final_answer,
    first_step,
    normalise_number,
    split_steps,
)
from seed_tot_tasks.values import parse_rating


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
        ("The step subtracts 3 and 4 from 16 and gets 9, which is right.\nVerdict: sure", 20.0),
        ("It is likely that she sells 9 eggs, but 9 * 2 is not 16.\nVerdict: impossible", 0.001),
        ("The numbers come from the question.\n**Verdict:** Likely", 1.0),
        ("Verdict: sure (the step is correct and useful)", 20.0),
        ("The verdict is impossible.", 0.001),
        ("I am sure the sub-answer is correct.", 20.0),  # no verdict line: the last verdict word
        # Replies seen from a 1.5B model with the old "The number is:" prompt: a number, no verdict.
        ("3", None),
        ("10\nThe sub-answer is correct.", None),
        # An echo of the prompt's option list is not a verdict.
        ("Verdict: sure\nVerdict: likely\nVerdict: impossible", None),
        ("The step is helpful.", None),
        ("", None),
    ],
)
def test_parse_value_reads_the_verdict_at_the_end(text, value):
    assert Gsm8kTask().parse_value(text) == value


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
        # the first stated rating wins, wherever its form: a leading number beats a later "N/10"
        ("6. The passage scores 9/10 on style.", 6.0),
        ("Score: 0", None),
        ("I give it 11/10!", None),
        ("Score: 15", None),
        ("The step is helpful.", None),
        ("", None),
    ],
)
def test_parse_rating(text, value):
    assert parse_rating(text) == value


def test_parse_rating_prefer_last():
    text = "Score: 3 for the first paragraph.\nThus the coherency score is 8"
    assert parse_rating(text) == 3.0 and parse_rating(text, prefer_last=True) == 8.0
    text = "The plan reads 9/10 on style but the endings clash.\nThus the coherency score is 4"
    assert parse_rating(text, prefer_last=True) == 4.0


@pytest.mark.parametrize(
    ("step", "wrong"),
    [
        ("Sub-question: How many eggs are left?\nSub-answer: 16 - 3 - 4 = 9 eggs.", None),
        ("Sub-question: How many eggs are left?\nSub-answer: 16 - 3 - 4 = 8 eggs.", "16 - 3 - 4 = 8"),
        ("Sub-question: Money?\nSub-answer: 9 * $2 = $18.", None),
        ("Sub-question: Money?\nSub-answer: 9 x $2 = $20.", "9 x $2 = $20"),
        ("Sub-question: Total?\nSub-answer: 1,000 + 500 = 1,500 dollars.", None),
        ("Sub-question: Share?\nSub-answer: 10 / 3 = 3.33 each, 2/3 = 0.66 left.", None),  # rounded, truncated
        ("Sub-question: Half?\nSub-answer: 20% of 50 = 10 and 1/2 of 10 = 5.", None),  # not plain arithmetic
        ("Sub-question: Chain?\nSub-answer: 5 * 2 = 10, and 10 + 3 = 14.", "10 + 3 = 14"),
        # a chain over lines: "$5,000 + $125" is a thousands group, not "$5" and a comma
        ("Sub-question: Price?\nSub-answer: = $5,000 + ($5,000 * 0.025)\n= $5,000 + $125\n= $5,125", None),
        ("Sub-question: Price?\nSub-answer: = $5,000 + $125\n= $5,135", "$5,000 + $125 = $5,135"),
        # LaTeX operators are operators: no check may start inside "180 \times (1 - 0.30)"
        ("Sub-question: Left?\nSub-answer: \\( 180 \\times (1 - 0.30) = 180 \\times 0.70 = 126 \\)", None),
        ("Sub-question: Left?\nSub-answer: \\( 180 \\times 0.70 = 136 \\)", "180 × 0.70 = 136"),
        ("Sub-question: Cost?\nSub-answer: \\[ 12 \\cdot 3 = 36 \\], \\( 36 \\div 4 = 9 \\)", None),
        ("Sub-question: Cost?\nSub-answer: 50% x 200 + 20 = 120", None),  # no check starts after an operator
    ],
)
def test_check_step_rejects_wrong_written_arithmetic(problems, step, wrong):
    earlier = "Sub-question: Eggs?\nSub-answer: 2 + 2 = 5."  # only the newest step is checked
    reason = Gsm8kTask().check_step(problems[0], earlier + "\n" + step)
    assert reason == (None if wrong is None else f"wrong arithmetic: {wrong}")


def test_a_declared_answer_at_the_last_step_ends_the_chain(problems):
    task = Gsm8kTask()
    state = "Sub-question: Eggs left?\nSub-answer: 9.\nSub-question: Money?\nSub-answer: 9 * 2 = 18. The answer is 18."
    assert not task.is_terminal(problems[0], state, 0, 2)  # before the last step: needs the closing header
    assert task.is_terminal(problems[0], state, 1, 2)  # at the last step: the declared answer ends it


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
    assert not task.is_terminal(problem, state, 0, 4)
    assert task.extract_answer(problem, state) == "9"  # best effort: no answer declared yet
    # Small models end intermediate sub-answers with "The answer is N" too: that is not the end.
    second = "**Sub-question:** How much does she make per egg?\nSub-answer: $2 per egg. The answer is 2."
    state = task.extend_state(state, second, 1)
    assert len(split_steps(state)) == 2
    assert not task.is_terminal(problem, state, 1, 4)
    assert task.extract_answer(problem, state) == "2"
    closing = (
        "Sub-question: Now we can answer the question: how much does she make?\n"
        "Sub-answer: 9 * 2 = $18. The answer is 18."
    )
    state = task.extend_state(state, closing, 2)
    assert len(split_steps(state)) == 3 and task.is_terminal(problem, state, 2, 4)
    assert task.extract_answer(problem, state) == "18"
    assert task.score(problem, task.extract_answer(problem, state)) == 1.0


def test_prompts_fill_every_field(problems):
    task = Gsm8kTask()
    problem = problems[0]
    state = (
        "Sub-question: How many eggs are left?\nSub-answer: 9.\n"
        "Sub-question: How much money?\nSub-answer: 18 dollars."
    )
    first = task.thought_prompt(problem, "", 0, 4)
    assert problem.question in first and "(none yet)" in first and "{" not in first
    middle = task.thought_prompt(problem, state, 1, 4)
    assert "Sub-answer: 9." in middle and "Now answer the original question" not in middle
    final = task.thought_prompt(problem, state, 3, 4)
    assert "Now answer the original question" in final and final.count(problem.question) == 3  # restated
    assert "Now answer the original question" in task.thought_prompt(problem, state, 1, 2)
    value = task.value_prompt(problem, state, 1)
    previous, newest = value.split("New step:")
    assert "How many eggs are left?" in previous and "How much money?" in newest and "How many eggs" not in newest
    assert "{" not in value and value.rstrip().endswith("Verdict: impossible (the step is wrong or useless)")
    assert "Think step by step" in task.cot_prompt(problem) and problem.question in task.cot_prompt(problem)


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
    assert [(p.id, p.gold) for p in loaded] == [("mine-line1", "2"), ("six", "6")]  # never a bundled id


def test_get_task_names_and_unknown_name():
    assert TASK_NAMES == ("gsm8k", "creative_writing", "blocksworld")
    assert isinstance(get_task("gsm8k"), Task) and get_task("GSM8K").name == "gsm8k"
    assert get_task("creative-writing").name == get_task("creative_writing").name == "creative_writing"
    with pytest.raises(SeedTotError, match="Unknown task 'chess': choose one of gsm8k, creative_writing, blocksworld"):
        get_task("chess")
