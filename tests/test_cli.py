"""End-to-end CLI runs in subprocesses on the tiny pair: exit codes, files written, resume."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from seed_tot.observe.trace import load_trace

pytestmark = pytest.mark.slow  # subprocess CLI runs

SMALL = ["--tiny", "--depth", "1", "--thoughts", "2", "--max-new-tokens", "6", "--value-max-new-tokens", "6"]


def seed_tot(*args: str, timeout: int = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "seed_tot", *args], capture_output=True, text=True, timeout=timeout
    )


@pytest.mark.parametrize(
    "command,method", [("gsm8k", "batched-sd"), ("creative-writing", "ar"), ("blocksworld", "sd")]
)
def test_task_command_writes_results_and_traces(tmp_path, command, method):
    out = tmp_path / "run"
    proc = seed_tot(command, *SMALL, "--method", method, "--limit", "1", "--out", str(out))
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = (out / "results.jsonl").read_text().splitlines()
    assert len(lines) == 1
    record = json.loads(lines[0])
    assert record["method"] == method and record["new_tokens"] > 0
    trace = load_trace(record["trace_path"])
    assert trace.problem_id == record["problem_id"] and len(trace.nodes) >= 3
    assert "tokens/s" in proc.stdout and "trace" in proc.stdout
    # the trace records the resolved configuration, all but where the run reads and writes and the machine
    from seed_tot.cli.run_config import NOT_RECORDED, RunConfig

    assert set(trace.config["run"]) == set(RunConfig.model_fields) - NOT_RECORDED
    assert trace.config["run"]["method"] == trace.config["method"] == method and trace.config["run"]["search"]
    # no --concurrency given: the batched methods search 16 problems at once, the serial ones 1
    assert json.loads((out / "runs.jsonl").read_text())["concurrency"] == {"batched-sd": 16, "ar": 1, "sd": 1}[method]


def test_seed_searches_many_problems_in_one_session_with_method_options(tmp_path):
    out = tmp_path / "run"
    proc = seed_tot("gsm8k", *SMALL, "--method", "seed", "--workers", "2", "--method-option", "batched_verify=true",
                    "--method-option", "share_prefix=true", "--limit", "3", "--concurrency", "2", "--out", str(out))
    assert proc.returncode == 0, proc.stderr[-2000:]
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert sorted(r["problem_id"] for r in records) == ["gsm8k-1", "gsm8k-2", "gsm8k-3"]
    run = json.loads((out / "runs.jsonl").read_text())
    assert run["method_options"] == ["batched_verify=true", "share_prefix=true"] and run["batching"] == "continuous"
    # the draft workers' memory is reported beside this process's: a SEED run holds a draft per worker
    assert len(run["peak_rss_workers_mib"]) == 2 and all(peak > 0 for peak in run["peak_rss_workers_mib"])
    assert "in 2 draft worker processes" in proc.stdout
    trace = load_trace(records[0]["trace_path"])
    assert any(batch.events for batch in trace.batches)  # SEED's scheduler events reach the trace


def test_resume_skips_finished_problems(tmp_path):
    out = tmp_path / "run"
    first = seed_tot("gsm8k", *SMALL, "--method", "ar", "--limit", "1", "--out", str(out))
    assert first.returncode == 0, first.stderr[-2000:]
    again = seed_tot("gsm8k", *SMALL, "--method", "ar", "--limit", "1", "--out", str(out))
    assert again.returncode == 2 and "--resume" in again.stderr
    resumed = seed_tot("gsm8k", *SMALL, "--method", "ar", "--limit", "2", "--out", str(out), "--resume")
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    ids = [json.loads(line)["problem_id"] for line in (out / "results.jsonl").read_text().splitlines()]
    assert ids == ["gsm8k-1", "gsm8k-2"]
    assert "1 of 2 problems already done" in resumed.stdout
    finished = seed_tot("gsm8k", *SMALL, "--method", "ar", "--limit", "2", "--out", str(out), "--resume")
    assert finished.returncode == 0, finished.stderr[-2000:]
    assert "nothing left to run" in finished.stdout and "| 2 |" in finished.stdout
    assert len((out / "runs.jsonl").read_text().splitlines()) == 2  # no third run: no model loaded, nothing ran


def test_resume_refuses_other_search_settings_and_keeps_the_results(tmp_path):
    out = tmp_path / "run"
    first = seed_tot("gsm8k", *SMALL, "--search", "bfs", "--method", "ar", "--limit", "1", "--out", str(out))
    assert first.returncode == 0, first.stderr[-2000:]
    before = (out / "results.jsonl").read_text()
    other = seed_tot("gsm8k", *SMALL, "--search", "bfs", "--thoughts", "3", "--method", "ar", "--limit", "2",
                     "--out", str(out), "--resume")
    assert other.returncode == 2
    assert "n_thoughts: 2 -> 3" in other.stderr and "choose another --out" in other.stderr
    assert (out / "results.jsonl").read_text() == before


@pytest.mark.parametrize(
    "args,needle",
    [
        (["--k-config", "2,x"], "k_config"),
        (["--k-config", "0,1"], "k_config"),
        (["--method", "ar", "--k", "3"], "speculative methods"),
        (["--target", "/no/such/model"], "does not exist"),
        (["--data", "/no/such/file.jsonl"], ""),
        (["--thoughts", "0"], "--thoughts"),
        (["--cot-samples", "-1"], "--cot-samples"),
        (["--method-option", "batched_verify"], "NAME=VALUE"),
        (["--tiny", "--method", "batched", "--method-option", "no_such=1"], "no_such"),
        (["--tiny", "--method", "fastcot"], "add --temperature 0 --value-temperature 0"),
        (["--tiny", "--method", "fastcot", "--temperature", "0"], "add --value-temperature 0,"),
        (["--value-mode", "logits", "--method", "seed"], "--value-mode samples"),
        (["--value-mode", "logits", "--method", "hf-generate"], "--value-mode samples"),
        (["--search", "self-consistency", "--no-vote"], "drop --no-cot and --no-vote"),
        (["--search", "bfs", "--thought-mode", "choose", "--method", "seed"], "--thought-mode sample"),
        (["--search", "bfs", "--thought-mode", "choose", "--method", "batched-lookup"], "cannot list its moves"),  # GSM8K has no move list
        # the byte tokenizer writes " sure", " likely" and " impossible" as " " + letters
        (["--tiny", "--method", "batched", "--value-mode", "logits"], "same token"),
    ],
)
def test_bad_input_exits_2_with_one_line(tmp_path, args, needle):
    # In process (a subprocess would spend seconds importing torch for each case); the real
    # process's exit code 2 is checked by test_missing_default_models_hint.
    from click.testing import CliRunner

    from seed_tot.cli import main

    result = CliRunner().invoke(main, ["gsm8k", "--limit", "1", "--out", str(tmp_path / "x"), *args])
    assert result.exit_code == 2, (result.exception, result.stderr[-2000:])  # an uncaught exception gives 1
    message = result.stderr.strip().splitlines()
    assert message and "Traceback" not in result.stderr
    assert needle in message[-1]


def test_self_consistency_runs_only_the_chains(tmp_path):
    out = tmp_path / "run"
    proc = seed_tot("gsm8k", "--tiny", "--method", "batched", "--search", "self-consistency", "--cot-samples", "2",
                    "--limit", "1", "--out", str(out))
    assert proc.returncode == 0, proc.stderr[-2000:]
    trace = load_trace(json.loads((out / "results.jsonl").read_text())["trace_path"])
    assert trace.search == "self-consistency"
    chains = [node for node in trace.nodes if node.id != 0]
    assert len(chains) == 3 and all(node.kind == "answer" for node in chains)


def test_blocksworld_tree_of_chosen_moves(tmp_path):
    out = tmp_path / "run"
    proc = seed_tot("blocksworld", *SMALL, "--method", "batched", "--search", "bfs", "--thought-mode", "choose",
                    "--no-cot", "--limit", "1", "--out", str(out))
    assert proc.returncode == 0, proc.stderr[-2000:]
    trace = load_trace(json.loads((out / "results.jsonl").read_text())["trace_path"])
    assert trace.config["search"]["thought_mode"] == "choose"
    moves = [node for node in trace.nodes if node.id != 0]
    assert len(moves) == 2 and all(0 < node.info["move_probability"] <= 1 and "rejected" not in node.info
                                   for node in moves)


@pytest.mark.parametrize("method", ["lookahead", "jacobi"])
def test_inner_decoders_run_with_the_default_sampling(tmp_path, method):
    out = tmp_path / "run"
    # sampled thoughts and values (the defaults); no chain of thought, whose budget is long
    proc = seed_tot("gsm8k", *SMALL, "--method", method, "--search", "bfs", "--no-cot", "--limit", "1", "--out", str(out))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads((out / "results.jsonl").read_text())["new_tokens"] > 0


def test_missing_default_models_hint(tmp_path, monkeypatch):
    proc = subprocess.run(
        [sys.executable, "-m", "seed_tot", "gsm8k", "--limit", "1", "--out", str(tmp_path / "x")],
        capture_output=True,
        text=True,
        timeout=300,
        env={**__import__("os").environ, "SEED_TOT_CACHE": str(tmp_path / "empty-cache")},
    )
    assert proc.returncode == 2
    assert "seed-tot models pull" in proc.stderr


def test_trace_show_and_plot(tmp_path):
    out = tmp_path / "run"
    assert seed_tot("gsm8k", *SMALL, "--method", "ar", "--limit", "1", "--out", str(out)).returncode == 0
    trace_file = out / "traces" / "gsm8k-1.json"
    shown = seed_tot("trace", "show", str(trace_file))
    assert shown.returncode == 0 and "answer:" in shown.stdout and "[0]" in shown.stdout
    plotted = seed_tot("trace", "plot", str(trace_file), "--out", str(tmp_path / "png"))
    assert plotted.returncode == 0
    assert (tmp_path / "png" / "gsm8k-1.tree.png").stat().st_size > 1000
    viewed = seed_tot("trace", "view", str(out))
    assert viewed.returncode == 0 and (out / "index.html").stat().st_size > 10_000


def test_bench_tiny_writes_table_json_and_plots(tmp_path):
    out = tmp_path / "bench"
    proc = seed_tot(
        "bench", "--tiny", "--tasks", "gsm8k", "--methods", "ar,sd,batched,hf-generate", "--k-configs", "1,1",
        "--temperatures", "1.0", "--depth", "1", "--thoughts", "2", "--max-new-tokens", "6", "--out", str(out),
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    data = json.loads((out / "bench.json").read_text())
    rows = {cell["row"] for cell in data["cells"]}
    assert rows == {"AR", "SD (1,1)", "batched AR", "transformers generate()"}
    assert all(cell["new_tokens"] > 0 for cell in data["cells"])
    assert "| AR |" in (out / "bench.md").read_text()
    assert (out / "speedup.png").stat().st_size > 1000


def test_add_cot_samples_sends_what_the_search_itself_would_send(tmp_path):
    """scripts/add_cot_samples.py on a --cot-samples 0 run gets the chains a --cot-samples 2 run
    samples itself (same seeds) and its vote. The two sides batch different rows, and on some CPUs
    float32 kernels round differently at another batch width, which can flip a random model's
    sampled token now and then; short chains keep that chance small."""
    common = [*SMALL, "--dtype", "float32", "--method", "batched", "--limit", "1", "--cot-max-new-tokens", "24"]
    without, with_samples = tmp_path / "without", tmp_path / "with"
    for out, samples in ((without, "0"), (with_samples, "2")):
        proc = seed_tot("gsm8k", *common, "--cot-samples", samples, "--out", str(out))
        assert proc.returncode == 0, proc.stderr[-2000:]
    script = Path(__file__).resolve().parent.parent / "scripts" / "add_cot_samples.py"
    proc = subprocess.run([sys.executable, str(script), str(without), "--samples", "2", "--dtype", "float32"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    added = json.loads((without / "cot_samples.jsonl").read_text().splitlines()[0])
    trace = load_trace(next((with_samples / "traces").glob("*.json")))
    sampled = sorted((node.info["cot_sample"], node.thought) for node in trace.nodes if node.info.get("cot_sample"))
    assert len(sampled) == 2 and [text.strip() for text in added["samples"]] == [text for _, text in sampled]
    assert len(added["finish_reasons"]) == len(added["sample_token_counts"]) == 2
    from seed_tot.observe.comparison import report_run
    from seed_tot_tasks import get_task

    assert report_run(without, get_task)[0].answers["final"] == trace.final_answer  # the report votes as the run did


def test_method_options_parse_to_booleans_numbers_and_text():
    from seed_tot.cli.run_checks import parse_method_option
    from seed_tot.errors import ConfigError

    assert parse_method_option("batched_verify=true") == ("batched_verify", True)
    assert parse_method_option("share_prefix=off") == ("share_prefix", False)
    assert parse_method_option("prefix_cache_mb=512.5") == ("prefix_cache_mb", 512.5)
    assert parse_method_option("max_depth=6") == ("max_depth", 6)
    assert parse_method_option("discipline=round-robin") == ("discipline", "round-robin")
    with pytest.raises(ConfigError, match="NAME=VALUE"):
        parse_method_option("=3")


def test_a_run_on_a_user_data_file_records_the_file_and_keeps_its_ids_apart(tmp_path):
    import hashlib

    data = tmp_path / "gsm8k.jsonl"  # named like the bundled task, its rows have no ids
    data.write_text(json.dumps({"question": "What is 3 + 4?", "answer": "#### 7"}) + "\n")
    out = tmp_path / "run"
    proc = seed_tot("gsm8k", *SMALL, "--method", "ar", "--data", str(data), "--out", str(out))
    assert proc.returncode == 0, proc.stderr[-2000:]
    record = json.loads((out / "results.jsonl").read_text())
    assert record["problem_id"] == "gsm8k-line1"  # never the bundled "gsm8k-1"
    expected = {"path": str(data.resolve()), "sha256": hashlib.sha256(data.read_bytes()).hexdigest()}
    assert load_trace(record["trace_path"]).data_file == expected
    assert json.loads((out / "runs.jsonl").read_text())["data_file"] == expected
    report = seed_tot("report", str(out))
    assert report.returncode == 0 and "gsm8k-line1: gold 7" in report.stdout, report.stderr


@pytest.mark.parametrize("command, args, expected", [
    ("gsm8k", [], ("self-consistency", "sample", "samples")),  # measured on held-out problems: docs/quality.md
    ("blocksworld", [], ("mcts", "choose", "logits")),  # decided on instances 41-60: docs/quality.md
    ("blocksworld", ["--method", "seed"], ("self-consistency", "sample", "samples")),  # SEED cannot score: the chains vote
    ("blocksworld", ["--method", "seed", "--search", "mcts"], ("mcts", "sample", "samples")),
    ("creative-writing", [], ("bfs", "sample", "samples")),
    ("gsm8k", ["--search", "bfs"], ("bfs", "sample", "samples")),
    ("blocksworld", ["--search", "bfs"], ("bfs", "choose", "logits")),  # the tree measured on instances 21-40
    ("blocksworld", ["--search", "bfs", "--thought-mode", "sample", "--value-mode", "samples"], ("bfs", "sample", "samples")),
    ("blocksworld", ["--search", "bfs", "--method", "seed"], ("bfs", "sample", "samples")),  # SEED cannot score
    ("blocksworld", ["--search", "bfs", "--method", "hf-generate"], ("bfs", "sample", "samples")),
])
def test_the_search_defaults_to_the_tasks_own(tmp_path, monkeypatch, command, args, expected):
    from click.testing import CliRunner

    import seed_tot.cli.task_run as task_run
    from seed_tot.cli import main

    planned = {}

    def plan(name, config):
        config = task_run.plan_run(name, config).config
        planned["settings"] = (config.search, config.thought_mode, config.value_mode)

    monkeypatch.setattr(task_run, "run_task", plan)
    result = CliRunner().invoke(main, [command, "--tiny", "--out", str(tmp_path / "x"), *args])
    assert result.exit_code == 0, result.output
    assert planned["settings"] == expected
