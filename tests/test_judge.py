"""The task hook judge_prompt / judge_record: any task that has it gets its answer judged by the
target (greedy, one request), and the judge's fields join the problem's record."""

from types import SimpleNamespace

from scripted_executor import ScriptedExecutor
from search_helpers import FORMATTER, TOKENIZER, make_task

from seed_tot.cli.task_run import problem_extra
from seed_tot.reasoning.answer_judge import JUDGE_DECODE, judge_answer
from seed_tot.reasoning.simple_task import SimpleTask
from seed_tot_tasks.creative_writing import CreativeWritingTask


class RhymeTask(SimpleTask):
    """Not a bundled task: a hook is all it takes to be judged."""

    def __init__(self) -> None:
        super().__init__(thought_template="", value_template="", name="rhymes")

    def judge_prompt(self, answer: str) -> str:
        return f"JUDGE does '{answer}' rhyme?"

    def judge_record(self, reply: str) -> dict:
        return {"rhymes": reply.strip() == "yes"}


def test_a_task_with_the_hook_gets_its_judge_fields():
    executor = ScriptedExecutor(TOKENIZER, lambda prompt, request: " yes ")
    assert judge_answer(RhymeTask(), executor, FORMATTER, "cat hat", seed=5) == {"rhymes": True}
    (request,) = executor.batches[0]
    assert request.config == JUDGE_DECODE and request.seed == 5 and request.request_id == "judge"
    assert "JUDGE does 'cat hat' rhyme?" in executor.prompts[0][0]


def test_no_hook_or_no_answer_asks_no_model():
    executor = ScriptedExecutor(TOKENIZER, lambda prompt, request: "unused")
    assert judge_answer(make_task(), executor, FORMATTER, "42", seed=0) == {}
    assert judge_answer(RhymeTask(), executor, FORMATTER, "", seed=0) == {}
    assert executor.batches == []


def test_creative_writing_records_coherency_and_the_reply():
    executor = ScriptedExecutor(TOKENIZER, lambda prompt, request: "The coherency score is 7. Fine.")
    assert judge_answer(CreativeWritingTask(), executor, FORMATTER, "A passage.", seed=1) == {
        "coherency": 7.0, "coherency_reply": "The coherency score is 7. Fine."}


def test_the_cli_judges_any_task_that_has_the_hook():
    executor = ScriptedExecutor(TOKENIZER, lambda prompt, request: "yes")
    result = SimpleNamespace(answer="cat hat", selection=None)
    assert problem_extra("rhymes", 3, RhymeTask(), executor, FORMATTER, result) == {"rhymes": True}
    assert problem_extra("simple", 3, make_task(), executor, FORMATTER, result) == {}
