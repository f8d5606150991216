"""Creative Writing: sentence splitting, the constraint score, plan/passage states, judge parsing."""

from __future__ import annotations

import pytest

from seed_tot.errors import SeedTotError
from seed_tot_tasks import get_task
from seed_tot_tasks.base import Task
from seed_tot_tasks.creative_writing import (
    CreativeWritingTask,
    constraint_count,
    constraint_fraction,
    passage_of,
    plan_of,
    split_paragraphs,
    split_sentences,
)

SENTENCES = [
    "It isn't difficult to do a handstand if you just stand on your hands.",
    "It caught him off guard that space smelled of seared steak.",
    "When she didn\u2019t like a guy who was trying to pick her up, she started using sign language.",
    "Each person who knows you has a different perception of who you are.",
]


def paragraph(lead: str, ending: str) -> str:
    return f"{lead} {ending}"


def passage(endings: list[str]) -> str:
    leads = ["Mia trained every morning.", "The astronaut opened the hatch.", "At the bar, Mia sighed.", "Later, calm."]
    return "\n\n".join(paragraph(lead, end) for lead, end in zip(leads, endings))


@pytest.fixture(scope="module")
def problems():
    return CreativeWritingTask().load()


def test_loads_100_inputs_of_four_sentences(problems):
    assert len(problems) == 100
    assert all(len(p.gold) == 4 for p in problems)
    assert problems[0].gold == SENTENCES
    assert problems[2].gold[1].startswith("You realize you're not alone")


def test_fragments_without_final_punctuation_are_split_at_the_run_on(problems):
    # Line 6 of the ToT data holds "Instead of a bachelorette party You realize you're not alone ...".
    assert problems[5].gold[1:3] == [
        "Instead of a bachelorette party",
        "You realize you're not alone as you sit in your bedroom massaging your calves after a long day of "
        "playing tug-of-war with Grandpa Joe in the hospital.",
    ]
    assert problems[28].gold[1] == "The heat"


def test_split_sentences_keeps_quotes_and_abbreviations():
    assert split_sentences('He said "Hi." Then Mr. Smith left! Why? He ate worms.') == [
        'He said "Hi."', "Then Mr. Smith left!", "Why?", "He ate worms.",
    ]  # fmt: skip


def test_constraint_score_all_four():
    text = passage(SENTENCES)
    assert constraint_count(text, SENTENCES) == 4 and constraint_fraction(text, SENTENCES) == 1.0


def test_constraint_score_tolerates_quotes_whitespace_case_and_markdown():
    endings = [s.replace("\u2019", "'").replace("isn't", "isn\u2019t") for s in SENTENCES]
    endings[1] = "**" + endings[1].upper() + "**  "
    text = passage(endings).replace("\n\n", "\n \n").replace(" stand on", "  stand\non")
    assert constraint_count(text, SENTENCES) == 4


def test_constraint_score_partial():
    endings = list(SENTENCES)
    endings[1] = "It caught him off guard."
    endings[3] = "Everyone sees you differently."
    assert constraint_count(passage(endings), SENTENCES) == 2
    assert constraint_fraction(passage(endings), SENTENCES) == 0.5
    # A sentence in the middle of a paragraph does not count.
    middle = "\n\n".join(f"{s} And then nothing happened." for s in SENTENCES)
    assert constraint_count(middle, SENTENCES) == 0


def test_constraint_score_reordered():
    swapped = [SENTENCES[0], SENTENCES[2], SENTENCES[1], SENTENCES[3]]
    assert constraint_count(passage(swapped), SENTENCES) == 3
    reversed_order = list(reversed(SENTENCES))
    assert constraint_count(passage(reversed_order), SENTENCES) == 1


def test_constraint_score_empty_and_single_newline_paragraphs():
    assert constraint_count("", SENTENCES) == 0 and constraint_fraction("", SENTENCES) == 0.0
    one_per_line = passage(SENTENCES).replace("\n\n", "\n")
    assert len(split_paragraphs(one_per_line)) == 4
    assert constraint_count(one_per_line, SENTENCES) == 4
    merged = passage(SENTENCES).replace("\n\n", " ")  # one paragraph: only its last sentence ends it
    assert constraint_count(merged, SENTENCES) == 1


def test_plan_then_passage_states(problems):
    task = CreativeWritingTask()
    problem = problems[0]
    state = task.extend_state("", "Plan:\n1. Handstand joke.\n2. Space.\n\nPassage:\nIgnored draft.", 0)
    assert state == "Plan:\n1. Handstand joke.\n2. Space."
    assert not task.is_terminal(problem, state, 0, 2) and task.extract_answer(problem, state) is None
    assert "Analyze this plan" in task.value_prompt(problem, state, 0)
    thought_1 = task.thought_prompt(problem, state, 1, 2)
    assert "1. Handstand joke." in thought_1 and SENTENCES[3] in thought_1 and "{" not in thought_1
    text = passage(SENTENCES)
    final = task.extend_state(state, "Sure! Here it is.\n\n**Passage:**\n" + text, 1)
    assert task.is_terminal(problem, final, 1, 2)
    assert task.extract_answer(problem, final) == text
    assert task.score(problem, task.extract_answer(problem, final)) == 1.0
    passage_value = task.value_prompt(problem, final, 1)
    assert text.strip() in passage_value and "Thus the coherency score is" in passage_value
    assert passage_value != task.judge_prompt(text)  # the value reasons first; the judge scores first
    headerless = task.extend_state(state, text, 1)
    assert passage_of(headerless) == text


def test_plan_of_without_header():
    assert plan_of("Open with the gym, move to space.") == "Open with the gym, move to space."
    assert plan_of("**Plan:** gym, then space\nPassage:\nText") == "gym, then space"


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("The passage flows well.\nThus the coherency score is 7", 7.0),
        ("Thus the coherency score is [8]", 8.0),
        (" 7\n\nThe passage is mostly coherent, though paragraph 2 scores lower.", 7.0),
        ("The coherency score is 6. Paragraph 3 would get a score of 2.", 6.0),
        ("Coherency: 9/10", 9.0),
        ("Thus the coherency score is 12", None),
        ("The passage is incoherent.", None),
    ],
)
def test_parse_judge(text, value):
    assert CreativeWritingTask().parse_judge(text) == value


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("The passage flows well.\nThus the coherency score is 7", 7.0),
        ("Paragraph 2 reads 9/10, but the endings clash.\nThus the coherency score is 4", 4.0),
        ("The plan is coherent.\nThus the coherency score is [8]", 8.0),
        ("Thus the coherency score is 12", None),
        ("The passage is incoherent.", None),
    ],
)
def test_parse_value_reads_the_concluding_score(text, value):
    assert CreativeWritingTask().parse_value(text) == value


def test_judge_prompt_asks_for_the_coherency_line():
    prompt = CreativeWritingTask().judge_prompt("  Some passage.  ")
    assert "Some passage." in prompt and 'Start your reply with "The coherency score is [s]"' in prompt


def test_registry_and_bad_files(tmp_path):
    task = get_task("creative-writing")
    assert isinstance(task, Task) and task.default_depth == 2 and task.fallback_value == 1.0
    path = tmp_path / "inputs.txt"
    path.write_text("One. Two. Three. Four.\nOnly one sentence here.\n")
    with pytest.raises(SeedTotError, match=r"inputs\.txt, line 2: expected 4 sentences"):
        task.load(path)
    with pytest.raises(SeedTotError, match="does not exist"):
        task.load(tmp_path / "nope.txt")
