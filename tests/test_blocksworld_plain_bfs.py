"""scripts/blocksworld_plain_bfs.py: the simulator's breadth-first search finds plans the simulator
accepts, as short as the gold plans; the node cap stops it; the stored results hold the same."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from script_helpers import load_script

from seed_tot_tasks.pddl import parse_pddl_action

ROOT = Path(__file__).resolve().parent.parent
STEP6 = ROOT / "tasks/data/blocksworld/planbench_step6.jsonl"
STEP8 = ROOT / "tasks/data/blocksworld/planbench_step8.jsonl"
STORED = ROOT / "results/blocksworld-plain-bfs/plain_bfs.json"

bfs = load_script("blocksworld_plain_bfs")


@pytest.mark.parametrize("data, index", [(STEP6, 40), (STEP6, 41), (STEP8, 0)])
def test_the_plan_found_is_valid_and_as_short_as_the_gold(data, index):
    problem = bfs.TASK.load(data)[index]
    row = bfs.solve(problem)
    assert row["solved"] and not row["capped"]
    actions = [parse_pddl_action(a) for a in row["plan"]]
    assert bfs.TASK.check(problem, actions).valid  # the task's own simulator accepts it
    assert bfs.TASK.score(problem, "\n".join(row["plan"])) == 1.0
    assert row["plan_length"] == len(problem.gold) == problem.meta["n_steps"]
    assert row["expanded"] > 0 and row["generated"] >= row["expanded"]


def test_the_node_cap_stops_the_search_unsolved():
    problem = bfs.TASK.load(STEP8)[0]
    needed = bfs.solve(problem)["expanded"]
    capped = bfs.solve(problem, max_expanded=needed - 1)
    assert capped["capped"] and not capped["solved"] and capped["plan"] is None
    assert bfs.solve(problem, max_expanded=needed)["solved"]  # the goal is tested before the cap


def test_the_stored_plans_are_valid_and_optimal():
    stored = json.loads(STORED.read_text())
    for block in stored["ranges"]:
        problems = {p.id: p for p in bfs.TASK.load(ROOT / block["data"])}
        rows = block["instances"]
        assert len(rows) == block["last"] - block["first"] + 1
        for row in rows:
            problem = problems[row["problem_id"]]
            assert bfs.TASK.check(problem, [parse_pddl_action(a) for a in row["plan"]]).valid
            assert row["plan_length"] == len(problem.gold)
        assert block["summary"] == bfs.summary(rows)
    assert stored["compare"]["instances"] == 80 and stored["compare"]["bfs_solved"] == 80
