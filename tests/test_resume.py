"""`--resume` continues a run only with the settings its traces recorded (seed_tot/cli/resume.py)."""

import json

import pytest

from seed_tot.cli.resume import changed_settings, check_resume, first_stored_trace
from seed_tot.errors import ConfigError
from seed_tot.metrics import RunMetrics
from seed_tot.observe.trace import MetricsRecord


def test_changed_settings_names_nested_differences_only():
    stored = {"search": "bfs", "search_config": {"n_thoughts": 3, "decode": {"top_p": 0.95}, "old_key": 1}}
    wanted = {"search": "bfs", "search_config": {"n_thoughts": 3, "decode": {"top_p": 0.9}, "new_key": 2}}
    assert changed_settings(stored, wanted) == ["search_config.decode.top_p: 0.95 -> 0.9"]
    assert changed_settings(stored, stored) == []


def stored_run(tmp_path, trace_config: dict, search: str = "bfs"):
    out = tmp_path / "run"
    (out / "traces").mkdir(parents=True)
    trace = {"schema_version": 1, "task": "gsm8k", "search": search, "executor": "ar", "problem_id": "gsm8k-1",
             "question": "q", "config": trace_config, "models": {"target": "tiny-target"}, "nodes": [],
             "edges": [], "chosen_path": [], "final_answer": None, "gold": 1, "score": None, "correct": None,
             "metrics": MetricsRecord.of(RunMetrics()).model_dump(), "batches": []}
    (out / "traces" / "gsm8k-1.json").write_text(json.dumps(trace))
    row = {"problem_id": "gsm8k-1", "trace_path": "/elsewhere/run/traces/gsm8k-1.json"}
    (out / "results.jsonl").write_text(json.dumps(row) + "\n")
    assert first_stored_trace(out).config == trace_config  # found inside OUT/traces although the row names another folder
    return out


def wanted(**overrides):
    settings = {"task": "gsm8k", "search": "bfs", "target": "tiny-target", "search_config": {"breadth": 1}}
    return {**settings, **overrides}


def test_check_resume_allows_the_same_search_on_another_dtype(tmp_path):
    out = stored_run(tmp_path, {"search": {"breadth": 1}, "dtype": "float16", "method": "ar"})
    check_resume(out, wanted())  # executor and dtype are not compared: each trace records its own


@pytest.mark.parametrize("change,needle", [
    ({"search": "mcts"}, "search: 'bfs' -> 'mcts'"),
    ({"search_config": {"breadth": 2}}, "search_config.breadth: 1 -> 2"),
    ({"target": "default-target"}, "target: 'tiny-target' -> 'default-target'"),
])
def test_check_resume_refuses_another_search_or_target(tmp_path, change, needle):
    out = stored_run(tmp_path, {"search": {"breadth": 1}})
    with pytest.raises(ConfigError) as error:
        check_resume(out, wanted(**change))
    assert needle in str(error.value) and "choose another --out" in str(error.value)


def test_check_resume_skips_a_target_the_method_does_not_name(tmp_path):
    out = stored_run(tmp_path, {"search": {"breadth": 1}})
    check_resume(out, wanted(target=None))  # an engine's model comes from the engine
