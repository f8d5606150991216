"""scripts/bench_executors.py on the tiny pair: outputs, plots, and a resumed run that recomputes nothing."""

import importlib.util
import json
import sys
from pathlib import Path

from click.testing import CliRunner

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "bench_executors.py"
ARGS = ["--tiny", "--new-tokens", "4", "--temperatures", "1.0", "--workloads", "thought", "--n", "2",
        "--methods", "ar,batched,seed", "--scaling", "1,2", "--scaling-methods", "ar,batched", "--threads", "1"]


def load_script():
    spec = importlib.util.spec_from_file_location("bench_executors", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_executors"] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


def test_bench_executors_writes_tables_plots_and_resumes(tmp_path, monkeypatch):
    bench = load_script()
    out = tmp_path / "out"
    first = CliRunner().invoke(bench.main, ARGS + ["--out", str(out)])
    assert first.exit_code == 0, first.output
    report = json.loads((out / "bench_executors.json").read_text())
    assert report["meta"]["failures"] == []
    assert {r["method"] for r in report["summary"]} == {"ar", "batched", "seed"}
    assert sorted((r["n"], r["method"]) for r in report["scaling"]) == [
        (1, "ar"), (1, "batched"), (2, "ar"), (2, "batched")]
    assert all(r["new_tokens"] > 0 for r in report["summary"] + report["scaling"])
    for name in ["speedup.png", "scaling.png", "schedule.png", "utilization.png"]:
        assert (out / name).stat().st_size > 0, name
    assert len((out / "records.jsonl").read_text().splitlines()) == 3 + 4

    def must_not_run(*args, **kwargs):
        raise AssertionError("a recorded measurement was recomputed")

    monkeypatch.setattr(bench, "measure", must_not_run)
    second = CliRunner().invoke(bench.main, ARGS + ["--out", str(out)])
    assert second.exit_code == 0, second.output
    resumed = json.loads((out / "bench_executors.json").read_text())
    assert resumed["summary"] == report["summary"] and resumed["scaling"] == report["scaling"]


def test_bench_executors_rejects_unknown_method():
    result = CliRunner().invoke(load_script().main, ["--tiny", "--methods", "ar,warp-drive"])
    assert result.exit_code != 0
    assert "unknown methods ['warp-drive']" in result.output
