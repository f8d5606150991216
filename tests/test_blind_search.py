"""The blind baseline on Blocksworld: MCTS over moves drawn at random (thought mode "random") rated
by a constant (value mode "constant") asks the model nothing, so what it solves is the search's and
the simulator's work alone."""

from __future__ import annotations

import pytest
from search_helpers import FORMATTER

from seed_tot.errors import ConfigError
from seed_tot.reasoning.evaluator import CONSTANT_VALUE, REJECTED_VALUE
from seed_tot.search import MCTS, MCTSConfig
from seed_tot_tasks.blocksworld import BlocksworldTask, plan_lines

TASK = BlocksworldTask()
PROBLEMS = TASK.load()
WIDE = PROBLEMS[0]  # four legal moves at the start
EASY = PROBLEMS[1]  # one legal move at the start; ten blind iterations reach the goal


class NoModel:
    """An executor that fails on any call: the blind search must never need one."""

    name = "no-model"

    def run(self, requests):
        raise AssertionError(f"the blind search sent {len(requests)} requests")

    def close(self):
        pass


def blind(problem, seed: int = 0, iterations: int = 10):
    config = MCTSConfig(thought_mode="random", value_mode="constant", cot_candidate=False, n_thoughts=3,
                        iterations=iterations, seed=seed)
    return MCTS(TASK, NoModel(), FORMATTER, config).run(problem)


def shape(result) -> list[tuple[int | None, str]]:
    return [(node.parent, node.thought) for node in result.tree.nodes()]


def test_the_blind_search_sends_no_request_and_every_child_is_a_legal_move_of_its_parent():
    result = blind(WIDE)
    assert result.batches == []  # NoModel fails on any call; no batch is even logged
    children = [node for node in result.tree.nodes() if node.depth > 0]
    assert len(children) > 3
    for child in children:
        parent = result.tree.node(child.parent)
        moves = TASK.next_moves(WIDE, parent.state, parent.depth)
        assert child.thought in moves and plan_lines(child.state) == [*plan_lines(parent.state), child.thought]
        assert child.info["move_probability"] == pytest.approx(1 / len(moves))
        assert child.value == (REJECTED_VALUE if "rejected" in child.info else CONSTANT_VALUE)
        assert child.raw_values == [] and child.generation.new_tokens == 0
    for parent in {child.parent for child in children}:
        siblings = [n.thought for n in result.tree.children(parent)]
        node = result.tree.node(parent)
        assert len(siblings) == min(3, len(TASK.next_moves(WIDE, node.state, node.depth)))
        assert len(set(siblings)) == len(siblings)


def test_the_seed_decides_the_tree():
    first, again, other = blind(WIDE, seed=0), blind(WIDE, seed=0), blind(WIDE, seed=1)
    assert shape(first) == shape(again)
    assert shape(first) != shape(other)
    # four moves at the start, three drawn: the draws differ between the seeds
    assert [n.thought for n in first.tree.children(0)] != [n.thought for n in other.tree.children(0)]


def test_the_blind_search_reaches_the_goal_on_an_easy_instance():
    result = blind(EASY)
    goal = result.chosen
    assert result.score == 1.0 and goal.info.get("goal") and TASK.reaches_goal(EASY, goal.state)
    assert result.answer == "\n".join(plan_lines(goal.state))


def test_random_moves_need_a_task_that_lists_its_moves():
    from search_helpers import make_task

    with pytest.raises(ConfigError, match="cannot list its moves"):
        MCTS(make_task(), None, FORMATTER, MCTSConfig(thought_mode="random", value_mode="constant"))
