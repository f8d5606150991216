"""scripts/engine_peers.py on the tiny pair: every system runs in its own child process and lands in
the summary with plausible fields (transformers generate(), system d, capped to one problem and
marked so), and the tuned llama.cpp system (b) sends exactly the prompts (token ids, seeds, decode
settings) that the in-process search asks for."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("xllamacpp")
pytest.importorskip("psutil")

from seed_tot.models.loading import load_model  # noqa: E402
from seed_tot.observe.side_by_side import markdown_table  # noqa: E402
from seed_tot.reasoning.prompting import PromptFormatter  # noqa: E402
from seed_tot.search import search_class  # noqa: E402
from seed_tot.search.settings import SearchConfig  # noqa: E402
from seed_tot.search.steps import StepRunner  # noqa: E402
from seed_tot_tasks import get_task  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "engine_peers.py"
from seed_tot.runtime.int8_linear import int8_works  # noqa: E402

SYSTEMS = ("a", "b", "c", "d", *(("e",) if int8_works() else ()))  # e needs fbgemm's int8 product


@pytest.fixture(scope="module")
def peers(tmp_path_factory):
    out = tmp_path_factory.mktemp("peers")
    command = [sys.executable, str(SCRIPT), "--tiny", "--limit", "2", "--concurrency", "2", "--threads", "1",
               "--systems", ",".join(SYSTEMS), "--generate-limit", "1", "--out", str(out)]
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return out


@pytest.mark.slow
def test_summary_has_every_system_with_plausible_fields(peers):
    summary = json.loads((peers / "summary.json").read_text())
    markdown = (peers / "summary.md").read_text()
    assert "engine_peers.py" in summary["command"] and summary["command"] in markdown
    assert summary["chains"]["chains"] == 5 and summary["rows_in_flight"] == 10
    assert [row["system"] for row in summary["systems"]] == list(SYSTEMS)
    assert summary["generate_limit"] == 1
    for row in summary["systems"]:
        problems = summary["problems"][:1] if row["system"] == "d" else summary["problems"]
        assert "error" not in row, row.get("error")
        assert row["returncode"] == 0 and row["problems"] == len(problems) and 0 <= row["correct"] <= len(problems)
        assert row["new_tokens"] > 0 and row["tokens_per_s"] > 0
        assert 0 < row["run_wall_s"] <= row["process_wall_s"]
        assert 50 < row["peak_rss_mib"] < 64 * 1024
        assert row["peak_rss_largest_process_mib"] <= row["peak_rss_mib"]
        assert len(row["load_before"]) == 3 and len(row["load_after"]) == 3
        assert row["threads"] == 1
        assert sorted(p["problem_id"] for p in row["per_problem"]) == problems
        assert f"| {row['system']}: " in markdown
        assert (peers / row["system"] / "log.txt").is_file() and (peers / row["system"] / "measure.json").is_file()
    rows = {row["system"]: row for row in summary["systems"]}
    assert rows["b"]["slots"] == rows["c"]["slots"] == 10  # slots = 2 problems x 5 chains
    assert rows["b"]["knobs"]["xllamacpp"] and len(rows["b"]["knobs"]["model_sha256"]) == 64
    assert rows["c"]["engine"]["model_sha256"] == rows["b"]["knobs"]["model_sha256"]
    assert rows["b"]["chains"] == rows["c"]["chains"] == rows["d"]["chains"] == summary["chains"]
    assert rows["d"]["method"] == "hf-generate" and "--method hf-generate" in rows["d"]["command"]
    if "e" in rows:
        assert "--int8" in rows["e"]["command"] and rows["e"]["executor_settings"]["int8_linear_layers"] > 0
        assert "int8_linear_layers" not in rows["a"]["executor_settings"]
    table = markdown_table(summary["systems"], len(summary["problems"]))
    assert table in markdown
    marked = [line for line in table.splitlines() if "†" in line]
    assert marked[0].startswith("| d: ") and marked[1].startswith("† ran on the first problems only, not all 2")
    for problem_id in summary["problems"]:  # the answers table: gold, then each system's answer
        assert f"| {problem_id} | " in markdown


@pytest.mark.slow
def test_llama_cpp_prompts_equal_the_in_process_prompts(peers):
    sent = [json.loads(line) for line in (peers / "b" / "requests.jsonl").read_text().splitlines()]
    task = get_task("gsm8k")
    problems = task.load()[:2]
    formatter = PromptFormatter(load_model("tiny-target").tokenizer)  # what `seed-tot gsm8k --tiny` formats with
    trace = json.loads(next((peers / "a" / "run" / "traces").glob("*.json")).read_text())
    config = SearchConfig.model_validate(trace["config"]["search"])  # what the in-process run (a) searched with
    search = search_class(trace["search"])(task, None, formatter, config)
    expected = []
    for problem in problems:
        runner = StepRunner()
        runner.start(search.steps(problem))
        (waiting,) = runner.take_waiting()  # self-consistency: one batch, the chains of thought
        assert waiting.batch.role == "cot"
        expected += [(r, problem) for r in waiting.batch.requests]
    assert sorted(r["request_id"] for r in sent) == sorted(r.request_id for r, _ in expected)
    by_id = {r["request_id"]: r for r in sent}
    for request, problem in expected:
        got = by_id[request.request_id]
        assert got["prompt_ids"] == request.prompt_ids
        assert got["prompt_text"] == formatter.format(task.cot_prompt(problem))
        assert formatter.encode_text(got["prompt_text"]) == request.prompt_ids
        assert got["seed"] == request.seed
        assert got["config"] == request.config.model_dump(mode="json")
    temperatures = sorted(r["config"]["temperature"] for r in sent)
    assert temperatures == [0.0, 0.0] + [0.7] * 8


@pytest.mark.slow
def test_bench_peers_is_the_same_harness_as_a_command(tmp_path):
    out = tmp_path / "peers"
    command = [sys.executable, "-m", "seed_tot", "bench", "--peers", "--tiny", "--limit", "1", "--concurrency", "1",
               "--threads", "1", "--out", str(out)]
    done = subprocess.run(command, capture_output=True, text=True, cwd=tmp_path, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert [row["system"] for row in summary["systems"]] == ["a", "b"]
    assert summary["cpu"]["model"] and summary["threads"] == 1 and summary["concurrency"] == 1
    for row in summary["systems"]:
        assert row["problems"] == 1 and row["problems_per_hour"] > 0
        assert 0 < row["first_answer_s"] <= row["run_wall_s"]
    assert "problems/hour" in (out / "summary.md").read_text()
