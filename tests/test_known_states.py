"""Search that knows where it has been (seed_tot/search/known_states.py) on Blocksworld, with a
scripted generator: thoughts come from the gold plan, its undo moves and other legal moves."""

from __future__ import annotations

import re

import pytest
from scripted_executor import ScriptedExecutor
from search_helpers import FORMATTER, TOKENIZER

from seed_tot.search import BFS, BFSConfig, MCTS, MCTSConfig
from seed_tot_tasks.blocksworld import BlocksworldTask
from seed_tot_tasks.blocksworld_text import action_text, parse_action
from seed_tot_tasks.pddl import Action, parse_pddl_action

TASK = BlocksworldTask()
PROBLEM = TASK.load()[0]
GOLD = [action_text(parse_pddl_action(a)) for a in PROBLEM.gold]
UNDO = {"unstack": "stack", "stack": "unstack", "pick-up": "put-down", "put-down": "pick-up"}


def section(prompt: str, name: str) -> list[str]:
    """The lines of the last [NAME] section of a prompt (the problem's, after the demonstrations)."""
    body = prompt.rsplit(f"[{name}]\n", 1)[1]
    return [line for line in body.split("\n\n", 1)[0].splitlines() if line and not line.startswith("(no actions")]


def undo(line: str) -> str:
    action = parse_action(line)
    return action_text(Action(UNDO[action.name], action.args))


def reply(undo_first: bool, goal_value: str = "good"):
    """With `undo_first`: thought 0 is the undo of the last action (the next gold action at the
    start), thought 1 the next gold action, thought 2+ another legal action; without: thought 0
    is the next gold action, thought 1+ another legal action. Values: "good" for a gold
    prefix, "good" for an undo when `undo_first` (the evaluator is fooled), else "bad"."""

    def answer(prompt: str, request) -> str:
        index = int(re.search(r"(\d+)$", request.request_id).group(1))
        if "The current action is:" in prompt:
            plan = section(prompt, "PLAN")
            on_gold = plan == GOLD[: len(plan)]
            gold_next = GOLD[len(plan)] if on_gold and len(plan) < len(GOLD) else None
            if index == 0 and undo_first and plan:
                return undo(plan[-1])
            if index <= int(undo_first) and gold_next is not None:
                return gold_next
            legal = section(prompt, "POSSIBLE ACTIONS")
            others = [a for a in legal if a != gold_next and (not plan or a != undo(plan[-1]))]
            return others[0] if others else undo(plan[-1])
        plan, action = section(prompt, "PLAN SO FAR"), section(prompt, "ACTION")[0]
        is_gold = plan + [action] == GOLD[: len(plan) + 1]
        if plan + [action] == GOLD:
            return goal_value
        return "good" if is_gold or (undo_first and plan and action == undo(plan[-1])) else "bad"

    return answer


def run(search_class, config, undo_first: bool, goal_value: str = "good"):
    executor = ScriptedExecutor(TOKENIZER, reply(undo_first, goal_value))
    return search_class(TASK, executor, FORMATTER, config).run(PROBLEM), executor


def value_requests(executor) -> int:
    return sum(len(batch) for batch in executor.batches if "value" in batch[0].request_id)


def test_a_thought_that_undoes_the_last_move_is_pruned_and_the_search_solves_the_problem():
    config = BFSConfig(n_thoughts=2, breadth=1, cot_candidate=False, value_samples=1)
    result, executor = run(BFS, config, undo_first=True)
    assert result.answer == "\n".join(GOLD) and result.score == 1.0
    loops = [n for n in result.tree.nodes() if "on its path" in n.info.get("rejected", "")]
    assert loops and all(n.value == 0.0 and n.raw_values == [] for n in loops)  # never sent to the evaluator
    assert all(result.tree.node(n.info["repeats"]).id in result.tree.path_to(n.id) for n in loops)
    assert value_requests(executor) == sum(1 for n in result.tree.nodes() if n.depth and "repeats" not in n.info)
    # the first step's two thoughts are one move: the second is merged into the first
    assert "already in the tree" in result.tree.children(0)[1].info["rejected"]


def test_without_known_states_the_plan_loops(tmp_path):
    """Negative control: the same scripted run without known_states follows the undo moves."""
    config = BFSConfig(n_thoughts=2, breadth=1, cot_candidate=False, value_samples=1, known_states=False)
    result, _ = run(BFS, config, undo_first=True)
    plan = result.answer.splitlines()
    assert result.score == 0.0 and plan[1] == undo(plan[0]) and plan[2] == plan[0]


@pytest.mark.parametrize("known_states", [True, False])
def test_a_state_at_the_goal_ends_the_search(known_states):
    config = BFSConfig(n_thoughts=2, breadth=2, cot_candidate=False, value_samples=1, known_states=known_states)
    result, executor = run(BFS, config, undo_first=False, goal_value="bad")  # the evaluator misjudges the goal
    goal = next(n for n in result.tree.nodes() if n.state == "\n".join(GOLD))
    thought_batches = [b for b in executor.batches if "thought" in b[0].request_id]
    if known_states:
        assert goal.info["goal"] and result.chosen_path[-1] == goal.id and result.score == 1.0
        assert len(thought_batches) == len(GOLD)  # nothing expanded after the goal was reached
        later = [n for n in result.tree.nodes() if n.id > goal.id]
        assert all(n.info["bfs_step"] == goal.info["bfs_step"] for n in later)  # only its own expansion
    else:  # control: BFS keeps expanding the other kept state for the remaining depth
        assert len(thought_batches) == TASK.default_depth


def test_mcts_stops_at_the_goal():
    config = MCTSConfig(n_thoughts=2, iterations=30, cot_candidate=False, value_samples=1)
    result, executor = run(MCTS, config, undo_first=False)
    goal = result.tree.node(result.chosen_path[-1])
    assert result.score == 1.0 and goal.info.get("goal")
    assert max(n.id for n in result.tree.nodes()) < goal.id + config.n_thoughts  # nothing expanded after it
    control, control_executor = run(MCTS, config.model_copy(update={"known_states": False}), undo_first=False)
    assert len(executor.batches) < len(control_executor.batches)


def test_a_plan_shown_at_the_goal_is_the_answer_whatever_the_chains_vote():
    from seed_tot.search.answers import is_chain_of_thought, select_answer
    from seed_tot.tree import ReasoningTree

    tree = ReasoningTree()
    root = tree.add_root("")
    wrong = "\n".join(GOLD[:2])  # a legal plan that stops short of the goal
    for index in range(2):  # the greedy chain and a sampled one agree on it
        chain = tree.add_child(root.id, thought=wrong, state=wrong, kind="answer")
        chain.info["cot" if index == 0 else "cot_sample"] = True if index == 0 else index
    goal = tree.add_child(root.id, thought=GOLD[-1], state="\n".join(GOLD), kind="answer")
    goal.value = 0.0
    assert select_answer(TASK, PROBLEM, tree, goal.id, vote=True).answer == wrong  # unmarked: outvoted 2 to 1
    goal.info["goal"] = True
    selection = select_answer(TASK, PROBLEM, tree, goal.id, vote=True)
    assert selection.method == "goal" and selection.answer == "\n".join(GOLD)
    assert select_answer(TASK, PROBLEM, tree, goal.id, vote=True, keep=is_chain_of_thought).answer == wrong
