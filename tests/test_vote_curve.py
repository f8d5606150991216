"""scripts/vote_curve.py: the counted vote equals listing every subset (with the greedy chain's
tie-break), and the stored curve is what the stored pools and reports give."""

from __future__ import annotations

import json
from collections import Counter
from itertools import combinations
from pathlib import Path

import pytest
from script_helpers import load_script

from seed_tot.analysis.vote_counts import counted_vote_accuracy
from seed_tot.observe.paired_stats import expected_vote_accuracy

ROOT = Path(__file__).resolve().parent.parent
STORED = ROOT / "results/vote-curve/curve.json"


def listed(answers, correct, k, fixed):
    """Every k-subset listed: the fixed chain always votes and wins a tie its answer is in."""
    total = 0.0
    subsets = list(combinations(answers, k))
    for subset in subsets:
        votes = Counter(a for a in (*subset, fixed) if a is not None)
        if not votes:
            continue
        top = max(votes.values())
        tied = [a for a, n in votes.items() if n == top]
        total += float(fixed in correct) if fixed in tied else sum(a in correct for a in tied) / len(tied)
    return total / len(subsets)


@pytest.mark.parametrize("answers, correct, fixed", [
    (["4", "4", "5", None, "5", "6", "4", None], {"4"}, "5"),
    (["1", "2", "3", "1", "2", "3"], {"2"}, "2"),
    (["1", "2", "3", "1", "2", "3"], {"2"}, "7"),
    ([None, None, "7", "8"], {"8"}, None),
    (["9"] * 5 + ["3"] * 5, {"3"}, "9"),
])
def test_the_counted_vote_is_the_mean_over_every_subset(answers, correct, fixed):
    for k in range(0 if fixed is not None else 1, len(answers) + 1):
        assert counted_vote_accuracy(answers, correct, k, fixed=fixed) == pytest.approx(listed(answers, correct, k, fixed))
        if k:
            assert counted_vote_accuracy(answers, correct, k) == pytest.approx(expected_vote_accuracy(answers, correct, k))


def test_the_stored_curve_is_re_derived_from_the_pools():
    curve = load_script("vote_curve")
    stored = json.loads(STORED.read_text())
    derived = curve.build()
    assert derived["pools"] == stored["pools"]
    assert derived["all"] == stored["all"]
    ks = {b["pool"]: [p["k"] for p in b["plain"]] for b in stored["pools"]}
    assert ks["results/heldout-gsm8k-43-100/cot-pool"] == list(range(1, 17))
    # the plain vote of 8 is the stored reports' own "plain vote of 8 samples", to their rounding
    for block in stored["pools"]:
        pool = block["pool"]
        reports = [json.loads((ROOT / p).read_text())["heldout"] for p in curve.REPORTS]
        row = next(r for h in reports for key, rows in h.items() if key.split(":")[0] == pool
                   for r in rows if r["rule"] == "plain vote of 8 samples")
        eight = next(p for p in block["plain"] if p["k"] == 8)
        assert round(eight["correct"], 2) == row["correct"] and round(eight["tokens"], 1) == row["tokens"]
        assert len(block["judged"]) == 2
