"""scripts/answer_headroom.py: does a correct answer exist among a run's voting candidates."""

import importlib.util
import subprocess
import sys
from pathlib import Path

from test_report import task, write_run

from seed_tot.task import Problem
from seed_tot.tree import ReasoningTree

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "answer_headroom.py"
spec = importlib.util.spec_from_file_location("answer_headroom", SCRIPT)
answer_headroom = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = answer_headroom  # dataclasses look their module up
spec.loader.exec_module(answer_headroom)

PROBLEM = Problem(id="p", question="What is 3 + 4?", gold="7")


def leaf_tree(answers: list[str], rejected: set[int] = frozenset(), chain: str | None = None) -> ReasoningTree:
    tree = ReasoningTree()
    root = tree.add_root("")
    for index, answer in enumerate(answers):
        leaf = tree.add_child(root.id, thought=f"ANSWER: {answer}", state=f"ANSWER: {answer}", kind="answer")
        if index in rejected:
            leaf.info["rejected"] = "shown wrong"
    if chain is not None:
        node = tree.add_child(root.id, thought=f"ANSWER: {chain}", state=f"ANSWER: {chain}", kind="answer")
        node.info["cot"] = True
    return tree


def test_leaves_and_chains_are_scored_apart():
    leaves, chains = answer_headroom.candidate_correctness(task(), PROBLEM, leaf_tree(["7", "8"], chain="9"))
    assert sorted(leaves) == [False, True] and chains == [False]


def test_a_rejected_leaf_holds_no_gold():
    leaves, _ = answer_headroom.candidate_correctness(task(), PROBLEM, leaf_tree(["7", "8"], rejected={0}))
    assert leaves == [False]  # counting the rejected 7 would say the tree held the gold


def test_headroom_counts_problems_with_a_correct_candidate():
    h = answer_headroom.headroom([
        (False, [False, True], []),  # the gold was a leaf; the vote missed it
        (True, [], [True]),  # only the chain was right
        (False, [False], [False]),
    ])
    assert (h.problems, h.final, h.leaf_holds_gold, h.candidate_holds_gold) == (3, 1, 1, 2)
    assert h.correct_leaf_share == 0.25  # (1/2 + 0) / 2 problems with leaves


def test_a_run_folder_gives_one_outcome_per_problem(tmp_path):
    problems = [Problem(id="mine-1", question="What is 3 + 4?", gold="7"),
                Problem(id="mine-2", question="What is 3 + 4?", gold="8")]  # the scripted leaves all say 7
    write_run(tmp_path, problems)
    outcomes = answer_headroom.run_outcomes(tmp_path, lambda name: task())
    assert [(final, any(leaves)) for final, leaves, _ in outcomes] == [(True, True), (False, False)]


def test_the_script_refuses_a_folder_without_a_run_in_one_sentence(tmp_path):
    out = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path)], capture_output=True, text=True, check=False)
    assert out.returncode != 0 and "Traceback" not in out.stderr
