"""scripts/bench_api.py compares the API with the CLI on the same trees: the CLI reads the problems
under the ids the API gives their text, so both sides make the same tokens and answers."""

import json
import subprocess
import sys

import pytest

from script_helpers import SCRIPTS


@pytest.mark.slow
def test_the_api_and_the_cli_grow_the_same_trees_in_the_benchmark(tmp_path):
    out = tmp_path / "bench"
    proc = subprocess.run([sys.executable, str(SCRIPTS / "bench_api.py"), "--tiny", "--limit", "2", "--levels", "1",
                           "--out", str(out), "--", "--max-new-tokens", "8", "--threads", "1"],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    cli, api = json.loads((out / "bench_api.json").read_text())["rows"]
    assert (cli["way"], api["way"]) == ("cli", "api")
    assert cli["answers"] == api["answers"] and len(api["answers"]) == 2
    assert cli["new_tokens"] == api["new_tokens"] > 0
    assert "| yes | 2 of 2 |" in proc.stdout
