"""scripts/api_adversarial_load.py, short: a few well-behaved clients beside a hostile one on the
tiny pair. Nothing of theirs is lost, every hostile request gets its own status and is refused
while the largest allowed request still runs (it waits for no search), and the server exits on
Ctrl-C in time during the largest request it allows.

The assertions are on counts, statuses and order; the only clocks are bounds the server enforces
itself (its forced exit) or generous ones, so a loaded machine does not fail the test. The strict
figures (milliseconds per refusal, the latency ratio) are the script's report (docs/api_server.md)."""

import json
import subprocess
import sys

from script_helpers import SCRIPTS

SHUTDOWN = 3.0
QUICK = ("over budget (max_tokens one more)", "over budget (n=8, max_tokens=8192)", "n_thoughts 200000",
         "n_thoughts 10^9", "malformed JSON", "2 MB body, Content-Length", "2 MB body, chunked")


def test_a_hostile_client_costs_the_others_no_answer_and_the_server_still_stops(tmp_path):
    out = tmp_path / "adversarial.json"
    proc = subprocess.run([sys.executable, str(SCRIPTS / "api_adversarial_load.py"), "--clients", "4", "--requests", "2",
                           "--baseline-seconds", "0", "--max-request-tokens", "4096", "--max-queue", "8",
                           "--shutdown-timeout", str(SHUTDOWN), "--phase-limit", "240", "--out", str(out),
                           "--work", str(tmp_path / "work")],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(out.read_text())
    assert result["baseline"]["lost"] == 0 and result["with_hostile"]["lost"] == 0
    assert result["with_hostile"]["answered"] == result["with_hostile"]["requests"] >= 8
    hostile = {r["request"]: r for r in result["hostile"]}
    assert all(r["ok"] for r in hostile.values()), hostile
    largest = hostile["largest allowed"]
    assert largest["status"] == 200  # the budget's own bound lets it in
    # each its own refusal, or 429 where the queue was full as it came (refused before its body is read)
    own = [400, 400, 400, 400, 400, 413, 413]
    assert all(hostile[name]["status"] in (status, 429) for name, status in zip(QUICK, own)), hostile
    assert all(hostile[name]["code"] == "queue_full" for name in QUICK if hostile[name]["status"] == 429), hostile
    assert {hostile[n]["code"] for n in QUICK if n.startswith("over budget") and hostile[n]["status"] == 400} <= {"over_budget"}
    # refused while the largest allowed request was still being grown: no refusal waits for a search
    assert all(hostile[name]["answered_at"] < largest["answered_at"] for name in QUICK), hostile
    assert all(hostile[name]["seconds"] < 10 for name in QUICK), hostile
    flood = next(r for name, r in hostile.items() if name.startswith("flood"))
    assert flood["retry_after_sent"] and flood["max_seconds"] < 10, flood  # some 429s, each with Retry-After
    assert hostile["disconnect mid-search"]["status"] == hostile["disconnect mid-stream"]["status"] == "cancelled"
    assert result["tracebacks_in_log"] == 0
    # the server ends itself 3 s after cancelling (seed_tot/cli/api_server/server.py), whatever runs
    assert result["sigint_once"]["exit_code"] == 0 and result["sigint_once"]["exit_seconds"] < SHUTDOWN + 5
    assert result["sigint_twice"]["exit_seconds"] < 0.5 + 5
