import re
import runpy
import sys
from pathlib import Path

import pytest

import seed_tot as st

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "example_custom_search.py"
DOC = ROOT / "docs" / "api.md"


def test_the_documented_example_is_the_script_file():
    doc = DOC.read_text(encoding="utf-8")
    block = re.search(r"<!-- example:begin -->\n```python\n(.*?)```\n<!-- example:end -->", doc, re.S)
    assert block, "docs/api.md lost its example block"
    assert block.group(1) == SCRIPT.read_text(encoding="utf-8")


def test_the_example_runs_on_the_tiny_pair(tmp_path, monkeypatch, capsys):
    trace_path = tmp_path / "trace.json"
    monkeypatch.setattr(sys, "argv", [str(SCRIPT), "tiny", "ar", str(trace_path)])
    with pytest.raises(SystemExit) as exit_:  # a click command ends the process
        runpy.run_path(str(SCRIPT), run_name="__main__")
    assert exit_.value.code == 0
    assert "answer=" in capsys.readouterr().out
    trace = st.load_trace(trace_path)
    assert trace.search == "bfs" and trace.problem_id == "apples" and trace.gold == "7"
    assert len(trace.nodes) >= 1 + 3  # the root and at least one expansion
    # BFS b=2, n=3: the root's 3 thoughts, then the 2 kept states' 6 in one batch; greedy values: k=1
    assert [b.size for b in trace.batches if b.role == "thought"] == [3, 6, 6]
    assert trace.metrics.new_tokens > 0 and trace.metrics.tokens_per_second > 0
    # random tiny models rarely write a readable 1-10 rating: the fallback value carries the run
    rated = [n for n in trace.nodes if n.kind != "root"]
    assert all(n.value is not None for n in rated)
    assert trace.metrics.parse_failures == sum(1 for n in rated if n.value_parsed is False)
    rebuilt = st.tree_from_trace(trace)
    assert len(rebuilt) == len(trace.nodes)


def test_public_api_names_resolve():
    for name in st.__all__:
        assert getattr(st, name) is not None
