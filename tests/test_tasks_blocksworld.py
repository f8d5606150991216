"""Blocksworld: PDDL parsing, simulation, PlanBench wording, action reading and the task contract."""

from __future__ import annotations

import json
import re

import pytest

from seed_tot.errors import SeedTotError
from seed_tot_tasks import get_task
from seed_tot_tasks.base import Task, load_template
from seed_tot_tasks.blocksworld import BlocksworldTask, load_domain, parse_good_bad, planning_problem
from seed_tot_tasks.blocksworld_text import action_text, facts_text, parse_action, statement_text
from seed_tot_tasks.pddl import (
    Action,
    PlanningProblem,
    apply_action,
    check_plan,
    parse_pddl_action,
    parse_problem,
    shortest_plan,
)

DOMAIN = load_domain()


@pytest.fixture(scope="module")
def task() -> BlocksworldTask:
    return BlocksworldTask()


@pytest.fixture(scope="module")
def problems(task):
    return task.load()


def gold_actions(problem) -> list[Action]:
    return [parse_pddl_action(a) for a in problem.gold]


def facts(text: str) -> frozenset:
    return frozenset(tuple(part.split()) for part in text.split(","))


# --- PDDL and simulation ---------------------------------------------------------------------


def test_domain_has_the_four_operators_with_their_preconditions():
    assert set(DOMAIN.operators) == {"pick-up", "put-down", "stack", "unstack"}
    assert DOMAIN.operators["unstack"].preconditions == (
        ("on", "?ob", "?underob"), ("clear", "?ob"), ("handempty",),
    )  # fmt: skip
    assert ("clear", "?underob") in DOMAIN.operators["stack"].delete


def test_dataset_has_145_six_step_instances(problems):
    assert len(problems) == 145
    assert all(len(p.gold) == 6 and p.meta["n_steps"] == 6 for p in problems)


def test_every_gold_plan_parses_executes_and_reaches_its_goal(task, problems):
    for problem in problems:
        result = task.check(problem, gold_actions(problem))
        assert result.valid, (problem.id, result.reason)
        assert task.score(problem, "\n".join(problem.gold)) == 1.0


def test_gold_plans_are_optimal(problems):
    # Breadth-first search confirms the set's premise: 6 steps is the optimum for every instance.
    for problem in problems:
        instance = planning_problem(problem.meta["instance_pddl"])
        assert len(shortest_plan(DOMAIN, instance.objects, instance.init, instance.goal)) == 6, problem.id


def test_dropping_the_last_action_fails_for_every_instance(task, problems):
    for problem in problems:
        result = task.check(problem, gold_actions(problem)[:-1])
        assert result.executable and not result.reaches_goal, problem.id
        assert "goal not reached" in result.reason


def test_dropping_any_action_is_rejected(task, problems):
    # The gold plans are optimal (6 steps), so no 5-step plan can reach the goal.
    for problem in problems:
        plan = gold_actions(problem)
        for index in range(len(plan)):
            assert not task.check(problem, plan[:index] + plan[index + 1 :]).valid, (problem.id, index)


def test_swapping_adjacent_actions_is_rejected(task, problems):
    # Every action flips the hand between empty and holding, so two adjacent actions always need
    # different hand states and swapping them breaks a precondition.
    for problem in problems:
        plan = gold_actions(problem)
        for index in range(len(plan) - 1):
            swapped = list(plan)
            swapped[index], swapped[index + 1] = swapped[index + 1], swapped[index]
            result = task.check(problem, swapped)
            assert not result.executable and result.steps_done <= index, (problem.id, index)


def test_preconditions_are_checked_in_the_domain_order():
    state = facts("on a b, ontable b, ontable c, clear a, clear c, handempty")
    assert apply_action(DOMAIN, state, Action("unstack", ("a", "c")))[1] == "(unstack a c) needs (on a c)"
    assert apply_action(DOMAIN, state, Action("pick-up", ("b",)))[1] == "(pick-up b) needs (clear b)"
    assert apply_action(DOMAIN, state, Action("put-down", ("a",)))[1] == "(put-down a) needs (holding a)"
    holding, reason = apply_action(DOMAIN, state, Action("unstack", ("a", "b")))
    assert reason == "" and holding == facts("holding a, clear b, ontable b, ontable c, clear c")
    assert apply_action(DOMAIN, holding, Action("pick-up", ("c",)))[1] == "(pick-up c) needs (handempty)"
    stacked, _ = apply_action(DOMAIN, holding, Action("stack", ("a", "c")))
    assert stacked == facts("on a c, clear a, handempty, clear b, ontable b, ontable c")
    assert apply_action(DOMAIN, state, Action("fly", ("a",)))[1] == "unknown action 'fly'"


def test_malformed_pddl_gives_a_clear_error():
    with pytest.raises(SeedTotError, match="unmatched"):
        parse_problem("(define (problem x)) )")
    with pytest.raises(SeedTotError, match=":goal"):
        parse_problem("(define (problem x) (:objects a) (:init (clear a)))")


# --- PlanBench wording -----------------------------------------------------------------------


def test_statement_matches_planbench_wording_for_hand_checked_instances(problems):
    by_id = {p.id: p for p in problems}
    # Written by hand from the PDDL of each instance (facts sorted as PlanBench sorts them).
    expected = {
        "generated_basic_3/instance-26.pddl": (
            "As initial conditions I have that, the blue block is clear, the hand is empty, the red block is "
            "on top of the orange block, the blue block is on top of the red block and the orange block is on "
            "the table.\nMy goal is to have that the orange block is on top of the blue block."
        ),
        "generated_basic/instance-194.pddl": (
            "As initial conditions I have that, the blue block is clear, the yellow block is clear, the hand "
            "is empty, the red block is on top of the orange block, the blue block is on top of the red block, "
            "the orange block is on the table and the yellow block is on the table.\nMy goal is to have that "
            "the blue block is on top of the yellow block and the orange block is on top of the blue block."
        ),
    }
    for problem_id, text in expected.items():
        assert by_id[problem_id].question == text
    five_blocks = next(p for p in problems if "(on a e)" in p.meta["instance_pddl"].replace("\n", " "))
    assert five_blocks.question == (
        "As initial conditions I have that, the red block is clear, the blue block is clear, the yellow block "
        "is clear, the hand is empty, the red block is on top of the white block, the yellow block is on top "
        "of the orange block, the blue block is on the table, the orange block is on the table and the white "
        "block is on the table.\nMy goal is to have that the red block is on top of the yellow block and the "
        "white block is on top of the orange block."
    )


def test_facts_text_reproduces_a_published_planbench_statement():
    # The initial conditions of an example in PlanBench's own blocksworld prompts.
    published = (
        "the red block is clear, the blue block is clear, the yellow block is clear, the hand is empty, the "
        "blue block is on top of the orange block, the red block is on the table, the orange block is on the "
        "table and the yellow block is on the table"
    )
    assert facts_text(facts("ontable d, on b c, clear a, handempty, ontable a, clear d, clear b, ontable c")) == (
        published
    )
    assert facts_text(facts("holding b")) == "I am holding the blue block"
    statement = statement_text(facts("on a c"), facts("on a c"))
    assert statement.endswith("My goal is to have that the red block is on top of the orange block.")


def test_action_text_uses_planbench_wording():
    assert action_text(Action("pick-up", ("a",))) == "pick up the red block"
    assert action_text(Action("put-down", ("e",))) == "put down the white block"
    assert action_text(Action("stack", ("f", "g"))) == "stack the magenta block on top of the black block"
    assert action_text(Action("unstack", ("h", "l"))) == "unstack the cyan block from on top of the gold block"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Unstack the red block from on top of the blue block.", Action("unstack", ("a", "b"))),
        ("STACK THE YELLOW BLOCK ON TOP OF THE ORANGE BLOCK", Action("stack", ("d", "c"))),
        ("The current action is: pick up the blue block\n[PLAN END]", Action("pick-up", ("b",))),
        ("put-down the white block;", Action("put-down", ("e",))),
        ("(unstack a b)", Action("unstack", ("a", "b"))),
        ("(pick-up c)", Action("pick-up", ("c",))),
        ("  Pickup block d.", Action("pick-up", ("d",))),
        ("stack red on blue", Action("stack", ("a", "b"))),
        ("**Put down the orange block**", Action("put-down", ("c",))),
        ("unstack the red block from the blue block, then put down the red block", Action("unstack", ("a", "b"))),
        ("pick up a block", None),
        ("stack the red block", None),
        ("I think the plan is finished.", None),
        ("", None),
    ],
)
def test_parse_action_reads_free_text(text, expected):
    assert parse_action(text) == expected


def test_parse_action_inverts_action_text():
    for name, args in [("pick-up", ("k",)), ("put-down", ("j",)), ("stack", ("i", "a")), ("unstack", ("b", "c"))]:
        assert parse_action(action_text(Action(name, args))) == Action(name, args)


# --- demonstrations (prompts/blocksworld) -------------------------------------------------------

# The demonstrations, written as facts; the prompt files must render them exactly.
DEMOS = [
    ("a b c d", "ontable a, ontable b, on c b, ontable d, clear a, clear c, clear d, handempty", "on d c"),
    ("a b c", "on a b, ontable b, ontable c, clear a, clear c, handempty", "on b c"),
    ("a b c", "on c b, on b a, ontable a, clear c, handempty", "on a c"),
]


def _blocks(template: str) -> list[str]:
    return [b.strip() for b in load_template("blocksworld", template).split("[STATEMENT]") if b.strip()]


def _demo_for(statement: str):
    for objects, init, goal in DEMOS:
        if statement_text(facts(init), facts(goal)) == statement:
            return tuple(objects.split()), facts(init), facts(goal)
    raise AssertionError(f"no demo renders as {statement!r}")


def _section(block: str, name: str) -> list[str]:
    match = re.search(rf"\[{name}\]\n(.*?)(?:\n\n|\n\[|$)", block, re.DOTALL)
    assert match, name
    return [line for line in match.group(1).splitlines() if line.strip()]


def test_demonstrations_are_valid_plans_for_their_own_instances(problems):
    instances = [planning_problem(p.meta["instance_pddl"]) for p in problems]
    eval_pairs = {(i.init, i.goal) for i in instances}
    blocks = _blocks("demonstrations")
    assert len(blocks) == len(DEMOS)
    for block in blocks:
        statement = block.split("\n\nMy plan is as follows:")[0]
        objects, init, goal = _demo_for(statement)
        assert (init, goal) not in eval_pairs  # never one of the 145 evaluation instances
        lines = block.split("[PLAN]\n")[1].split("\n[PLAN END]")[0].splitlines()
        plan = [parse_action(line) for line in lines]
        assert all(a is not None and action_text(a) == line for a, line in zip(plan, lines))
        instance = PlanningProblem("demo", objects, init, goal)
        assert check_plan(DOMAIN, instance, plan).valid
        assert len(plan) == len(shortest_plan(DOMAIN, objects, init, goal))


def test_value_demonstration_labels_agree_with_the_simulator():
    blocks = _blocks("value_demonstrations")
    assert {b.split("[EVALUATION]\n")[1].split(".")[0] for b in blocks} == {"good", "bad"}
    for block in blocks:
        objects, init, goal = _demo_for(block.split("\n\n[PLAN SO FAR]")[0])
        state = init
        for line in _section(block, "PLAN SO FAR"):
            if line != "(no actions yet)":
                state, reason = apply_action(DOMAIN, state, parse_action(line))
                assert state is not None, reason
        assert _section(block, "CURRENT STATE") == [facts_text(state)]
        (action_line,) = _section(block, "ACTION")
        label = block.split("[EVALUATION]\n")[1].split(".")[0]
        after, _ = apply_action(DOMAIN, state, parse_action(action_line))
        remaining = len(shortest_plan(DOMAIN, objects, state, goal))
        # good = allowed and on an optimal path; bad = not allowed or a detour.
        is_good = after is not None and len(shortest_plan(DOMAIN, objects, after, goal)) == remaining - 1
        assert (label == "good") == is_good, action_line


# --- the task contract ---------------------------------------------------------------------


def test_task_satisfies_the_protocol_and_registry():
    task = get_task("blocksworld")
    assert isinstance(task, Task) and isinstance(task, BlocksworldTask)
    assert task.default_depth == 7 and task.fallback_value == 0.0


def test_search_path_with_gold_actions_ends_terminal_and_scores_one(task, problems):
    problem = problems[1]
    state = ""
    for step, action in enumerate(problem.gold):
        assert not task.is_terminal(problem, state, step, 7)
        state = task.extend_state(state, f"The current action is: {action}\nthen more text", step)
    assert state.splitlines()[0] == action_text(parse_pddl_action(problem.gold[0]))
    assert task.is_terminal(problem, state, 5, 7)
    answer = task.extract_answer(problem, state)
    assert answer == state and task.score(problem, answer) == 1.0


def test_invalid_or_unreadable_action_ends_the_branch_with_score_zero(task, problems):
    problem = problems[1]  # blue on red on orange; the hand is empty
    bad = task.extend_state("", "pick up the orange block", 0)
    assert task.is_terminal(problem, bad, 0, 7) and task.score(problem, bad) == 0.0
    unreadable = task.extend_state("", "Let me think about this.\nMaybe later.", 0)
    assert unreadable == "Let me think about this."
    assert task.is_terminal(problem, unreadable, 0, 7) and task.score(problem, unreadable) == 0.0
    good = task.extend_state("", "unstack the blue block from on top of the red block", 0)
    assert not task.is_terminal(problem, good, 0, 7)
    assert task.score(problem, good) == 0.0  # executable but the goal is not reached
    assert task.score(problem, None) == 0.0 and task.extract_answer(problem, "") is None


def test_prompts_carry_the_statement_plan_state_and_demonstrations(task, problems):
    problem = problems[1]
    state = task.extend_state("", "(unstack b a)", 0)
    thought = task.thought_prompt(problem, state, 1, 7)
    assert "Pick up a block" in thought and "[PLAN END]" in thought  # intro and demonstrations
    assert problem.question in thought and "unstack the blue block from on top of the red block" in thought
    assert "I am holding the blue block" in thought and "{" not in thought
    value = task.value_prompt(problem, state, 0)
    assert value.rstrip().endswith("The evaluation is:")
    assert "[ACTION]\nunstack the blue block from on top of the red block" in value
    assert "[PLAN SO FAR]\n(no actions yet)" in value and "the hand is empty" in value.split("[ACTION]")[-2]


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("good. The red block must move first.", 1.0),
        ("Bad, the blue block is not clear.", 0.0),
        ("**Good**", 1.0),
        ("This action is not good because it undoes progress.", 0.0),
        ("not bad", None),
        ("I cannot tell.", None),
        ("", None),
    ],
)
def test_parse_good_bad(text, value):
    assert parse_good_bad(text) == value


def test_malformed_rows_name_the_file_and_line(tmp_path):
    path = tmp_path / "bw.jsonl"
    pddl = "(define (problem p) (:objects a) (:init (clear a)) (:goal (clear a)))"
    good_row = json.dumps({"id": "x", "instance_pddl": pddl})
    path.write_text(good_row + "\n" + '{"instance_pddl": "(define (problem p)"}\n')
    with pytest.raises(SeedTotError, match=r"bw\.jsonl, line 2: .*PDDL"):
        BlocksworldTask().load(path)
    path.write_text(good_row + "\n{not json\n")
    with pytest.raises(SeedTotError, match=r"line 2: not valid JSON"):
        BlocksworldTask().load(path)
    path.write_text(good_row + "\n")
    (problem,) = BlocksworldTask().load(path)
    assert problem.id == "x" and problem.question.endswith("My goal is to have that the red block is clear.")


def test_thought_prompt_lists_exactly_the_actions_legal_in_the_current_state(task, problems):
    """Holding a block, the only legal moves are putting it down or stacking it on a clear block;
    every listed action must pass the simulator and every other grounded action must fail it."""
    problem = problems[1]
    state = task.extend_state("", "(unstack b a)", 0)
    listed = task.thought_prompt(problem, state, 1, 7).split("[POSSIBLE ACTIONS]\n")[1].split("\n\n")[0].splitlines()
    assert "put down the blue block" in listed
    assert all(line.startswith(("put down the blue block", "stack the blue block")) for line in listed)
    for line in listed:
        assert task.check_step(problem, task.extend_state(state, line, 1)) is None
    objects = planning_problem(problem.meta["instance_pddl"]).objects
    for name in ("pick-up", "unstack", "stack", "put-down"):
        for first in objects:
            for second in objects:
                args = (first,) if name in ("pick-up", "put-down") else (first, second)
                text = action_text(Action(name, args))
                legal = task.check_step(problem, task.extend_state(state, text, 1)) is None
                assert legal == (text in listed), text
