"""scripts/evaluator_auroc.py on a synthetic GSM8K trace whose AUROC is known by hand."""

import importlib.util
import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

from seed_tot.observe.trace import EdgeRecord, MetricsRecord, NodeRecord, Trace, write_trace

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "evaluator_auroc.py"
spec = importlib.util.spec_from_file_location("evaluator_auroc", SCRIPT)
evaluator_auroc = importlib.util.module_from_spec(spec)
sys.modules["evaluator_auroc"] = evaluator_auroc  # dataclasses look their module up
spec.loader.exec_module(evaluator_auroc)

ANSWER = "Sub-question: Now we can answer the question: how much?\nSub-answer: The answer is {}."


def node(id, parent, value, state="Sub-question: a step?\nSub-answer: 1 + 1 = 2.", kind="thought", **info):
    depth = 0 if parent is None else (2 if id >= 5 else 1)
    return NodeRecord(id=id, parent=parent, depth=depth, kind=kind, state=state, thought="", value=value,
                      value_parsed=None if value is None else True, raw_values=[], generation=None,
                      evaluation=None, seeds={}, info=info)


def synthetic_trace() -> Trace:
    """Steps 1-4 under the root, each with one answer below (5-8: 18, 17, 18, 3; gold 18); step 9
    has no answer below; step 10 was rejected by a rule. Hand count: answered steps (value, reaches)
    (20,T) (1,F) (1,T) (0.001,F) (20,T) (20,F) (0.001,T) (0.001,F): 10.5 of 16 pairs -> 0.65625;
    with step 9 (20,F) among all steps: 11.5 of 20 -> 0.575."""
    nodes = [node(0, None, None, state="", kind="root")]
    nodes += [node(i, 0, v) for i, v in zip((1, 2, 3, 4), (20.0, 1.0, 1.0, 0.001))]
    nodes += [node(i, i - 4, v, state=ANSWER.format(a), kind="answer")
              for i, v, a in zip((5, 6, 7, 8), (20.0, 20.0, 0.001, 0.001), (18, 17, 18, 3))]
    nodes += [node(9, 0, 20.0), node(10, 0, 0.0, rejected="wrong arithmetic: 1 + 1 = 3")]
    metrics = MetricsRecord(problems=1, new_tokens=0, wall_seconds=0.0, tokens_per_second=None, requests=0, batches=0,
                            acceptance_rate=None, draft_tokens_proposed=0, draft_tokens_accepted=0,
                            target_forwards=0, draft_forwards=0, parse_failures=0, evaluations=9)
    return Trace(task="gsm8k", search="bfs", executor="scripted", problem_id="synthetic-1", question="How much?",
                 config={"search": {}}, models={}, nodes=nodes,
                 edges=[EdgeRecord(source=n.parent, target=n.id) for n in nodes if n.parent is not None],
                 chosen_path=[0, 1, 5], final_answer="18", gold="18", score=1.0, correct=True,
                 metrics=metrics, batches=[])


def test_auroc_counts_pairs_with_ties_half():
    assert evaluator_auroc.auroc([3, 2, 1, 0], [True, True, False, False]) == 1.0
    assert evaluator_auroc.auroc([3, 2, 1, 0], [False, False, True, True]) == 0.0
    assert evaluator_auroc.auroc([1, 1], [True, False]) == 0.5
    assert evaluator_auroc.auroc([1, 2], [True, True]) is None
    rng = random.Random(0)
    values = [rng.choice([0.001, 1, 20, 7]) for _ in range(60)]
    labels = [rng.random() < 0.4 for _ in range(60)]
    pos = [v for v, lab in zip(values, labels) if lab]
    neg = [v for v, lab in zip(values, labels) if not lab]
    brute = sum((p > n) + 0.5 * (p == n) for p in pos for n in neg) / (len(pos) * len(neg))
    assert evaluator_auroc.auroc(values, labels) == pytest.approx(brute)


def test_synthetic_trace_gives_the_hand_counted_auroc(tmp_path):
    write_trace(tmp_path / "traces" / "synthetic-1.json", synthetic_trace())
    steps, _ = evaluator_auroc.read_steps(evaluator_auroc.trace_files([tmp_path / "traces"]))
    assert sorted(s.node_id for s in steps) == [1, 2, 3, 4, 5, 6, 7, 8, 9]  # not the root, not the rejected step
    reaches = {s.node_id: s.reaches for s in steps}
    assert reaches == {1: True, 2: False, 3: True, 4: False, 5: True, 6: False, 7: True, 8: False, 9: False}
    answered = [s for s in steps if s.answered]
    assert evaluator_auroc.auroc([s.value for s in answered], [s.reaches for s in answered]) == pytest.approx(0.65625)
    assert evaluator_auroc.auroc([s.value for s in steps], [s.reaches for s in steps]) == pytest.approx(0.575)

    # the command line: samples from the trace, and logit values from a file (here the negated values)
    logits = tmp_path / "logits.jsonl"
    trace_path = str(tmp_path / "traces" / "synthetic-1.json")
    logits.write_text("".join(json.dumps({"trace": trace_path, "node_id": s.node_id, "value": -s.value}) + "\n"
                              for s in steps))
    proc = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path / "traces"), "--logits", str(logits)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    rows = {tuple(c.strip() for c in line.split("|")[1:4]): line for line in proc.stdout.splitlines()}
    assert "| 8 | 4 | 0.656 | 9 | 0.575 | 0.0 | 3 |" in rows[("gsm8k", "samples", "(all)")]
    assert "| 8 | 4 | 0.344 | 9 | 0.425 | 0.0 | 3 |" in rows[("gsm8k", "logits", "(all)")]
