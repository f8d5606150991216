"""`seed-tot report`: every problem is scored against the question and gold stored in its own
trace; a bundled problem of the same id that disagrees stops the report; sampled chains added
afterwards need their finish reasons."""

import json

import pytest
from scripted_executor import ScriptedExecutor
from search_helpers import FORMATTER, TOKENIZER

from seed_tot.api import to_trace
from seed_tot.errors import SeedTotError
from seed_tot.observe.comparison import report_run, table
from seed_tot.observe.trace import write_trace
from seed_tot.reasoning.simple_task import SimpleTask
from seed_tot.records import ProblemRecord, append_record
from seed_tot.search import BFS, BFSConfig
from seed_tot.task import Problem
from seed_tot_tasks.base import row_id

BUNDLED = [Problem(id="d-1", question="What is 3 + 4?", gold="5")]  # a deliberately different gold


class ReportTask(SimpleTask):
    votable = True

    def cot_prompt(self, problem):
        return f"SOLVE {problem.question}"


def task() -> ReportTask:
    return ReportTask(thought_template="THINK {question}", value_template="RATE {state}",
                      answer_pattern=r"ANSWER: *(\S+)", name="report-test", problems=list(BUNDLED))


def reply(prompt, request):
    return "ANSWER: 7" if prompt.startswith(("THINK", "SOLVE")) else "5"


def write_run(run, problems, search=None):
    """A run folder as the CLI writes it: one trace per problem and results.jsonl. `search(executor)`
    builds the search (default: a depth-1 BFS with the greedy chain of thought)."""
    for problem in problems:
        executor = ScriptedExecutor(TOKENIZER, reply)
        search_of = search or (lambda executor: BFS(task(), executor, FORMATTER, BFSConfig(
            n_thoughts=2, depth=1, value_samples=1, cot_samples=0)))
        result = search_of(executor).run(problem)
        path = write_trace(run / "traces" / f"{problem.id}.json", to_trace(result, task(), executor))
        append_record(run / "results.jsonl", ProblemRecord(
            problem_id=problem.id, method="scripted", answer=result.answer, gold=str(problem.gold), score=0.0,
            correct=False, new_tokens=result.metrics.new_tokens, wall_seconds=1.0, tokens_per_second=1.0,
            acceptance_rate=None, target_forwards=0, draft_forwards=0, parse_failures=0, trace_path=str(path)))


def test_a_custom_problem_is_scored_by_its_own_gold(tmp_path):
    write_run(tmp_path, [Problem(id="mine-line1", question="What is 3 + 4?", gold="7")])
    reports = report_run(tmp_path, lambda name: task())
    assert [r.answers["final"] for r in reports] == ["7"]
    assert reports[0].correct == dict.fromkeys(reports[0].correct, True)  # the bundled gold (5) would say wrong
    assert "| 1 | 1/1 (100%) | 1/1 (100%) | 1/1 (100%) | 1/1 (100%) | 1/1 (100%) |" in table(reports, "-")


def test_a_trace_that_disagrees_with_the_bundled_problem_of_its_id_is_refused(tmp_path):
    write_run(tmp_path, [Problem(id="d-1", question="What is 3 + 4?", gold="7")])
    with pytest.raises(SeedTotError, match="disagrees with the bundled problem"):
        report_run(tmp_path, lambda name: task())


def test_a_trace_that_agrees_with_the_bundled_problem_is_scored(tmp_path):
    write_run(tmp_path, [BUNDLED[0]])
    assert report_run(tmp_path, lambda name: task())[0].correct["final"] is False  # 7 against the gold 5


def test_added_chains_without_finish_reasons_are_refused_and_cut_ones_do_not_vote(tmp_path):
    write_run(tmp_path, [Problem(id="mine-line1", question="What is 3 + 4?", gold="8")])
    row = {"problem_id": "mine-line1", "samples": ["ANSWER: 8", "ANSWER: 8", "ANSWER: 8", "ANSWER: 8"]}
    (tmp_path / "cot_samples.jsonl").write_text(json.dumps(row) + "\n")
    with pytest.raises(SeedTotError, match="no finish reasons"):
        report_run(tmp_path, lambda name: task())
    row.update(finish_reasons=["eos", "eos", "length", "length"], sample_token_counts=[3, 3, 9, 9])
    (tmp_path / "cot_samples.jsonl").write_text(json.dumps(row) + "\n")
    report = report_run(tmp_path, lambda name: task())[0]
    # 2 leaves + the greedy chain say 7, the 2 whole samples 8: 3 against 2 (the cut ones would make it 4)
    assert report.answers["final"] == "7" and report.answers["cot_vote"] == "8" and report.sample_tokens == 24


def test_rows_of_a_user_file_never_take_a_bundled_id(tmp_path):
    bundled = tmp_path / "bundled.jsonl"
    bundled.write_text("{}\n")
    assert row_id({}, "gsm8k", bundled, bundled, 3) == "gsm8k-3"
    assert row_id({}, "gsm8k", tmp_path / "gsm8k.jsonl", bundled, 3) == "gsm8k-line3"
    assert row_id({"id": "x"}, "gsm8k", tmp_path / "mine.jsonl", bundled, 3) == "x"
