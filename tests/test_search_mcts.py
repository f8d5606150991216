import math

import pytest

from scripted_executor import ScriptedExecutor
from search_helpers import FORMATTER, PROBLEM, TOKENIZER, idea_reply, make_task

from seed_tot.search import MCTS, MCTSConfig
from seed_tot.search.answers import is_chain_of_thought


def run_mcts(reply=idea_reply, depth=3, **config):
    executor = ScriptedExecutor(TOKENIZER, reply)
    result = MCTS(make_task(depth), executor, FORMATTER, MCTSConfig(**config)).run(PROBLEM)
    return result, executor


def mean_path_value(tree, node_id):
    values = [tree.node(i).value for i in tree.path_to(node_id)[1:]]
    return sum(values) / len(values)


def test_mcts_finishes_with_batches_of_n_and_respects_the_depth_limit():
    result, executor = run_mcts(depth=3, n_thoughts=3, iterations=5, value_samples=2)
    assert executor.batches and [len(batch) for batch in executor.batches] == [3, 6] * (len(executor.batches) // 2)
    assert [b.role for b in result.batches] == ["thought", "value"] * (len(result.batches) // 2)
    for thoughts in executor.batches[0::2]:
        assert len({tuple(r.prompt_ids) for r in thoughts}) == 1 and len({r.seed for r in thoughts}) == 3
    tree = result.tree
    assert max(n.depth for n in tree.nodes()) == 3
    assert tree.root.info["visits"] == 5
    for node in tree.nodes():  # a parent is visited at least as often as its children together
        children = tree.children(node.id)
        if children and node.kind != "root":
            assert node.info["visits"] >= sum(c.info["visits"] for c in children)
    assert result.chosen.depth == 3


def test_uct_visits_every_child_of_the_root_before_revisiting_one():
    result, _ = run_mcts(depth=3, n_thoughts=3, iterations=3, simulate=False)
    root_children = result.tree.children(0)
    assert [c.info["visits"] for c in root_children] == [1, 1, 1]
    # each iteration expanded the node it selected: the root, then each unvisited child but the first.
    assert sum(1 for c in root_children if result.tree.children(c.id)) == 2


def test_simulation_rolls_out_to_the_depth_limit_along_the_best_children():
    result, executor = run_mcts(depth=4, n_thoughts=2, iterations=1)
    assert len(executor.batches) == 2 * 4  # root and three greedy descendants expanded
    path = result.tree.path_to(result.chosen.id)
    for parent, child in zip(path, path[1:]):
        best = max(result.tree.children(parent), key=lambda n: (n.value, -n.id))
        assert child == best.id


def test_max_reward_returns_the_answer_with_the_best_mean_path_value():
    def reply(prompt, request):
        if prompt.startswith("THINK"):
            return f"ANSWER: {request.seed % 50}" if "step 2:" in prompt else f"idea{request.seed % 1000}"
        return str(request.seed % 10)

    result, _ = run_mcts(reply, depth=3, n_thoughts=3, iterations=6, output_strategy="max_reward")
    tree = result.tree
    answers = [n for n in tree.nodes() if n.kind == "answer"]
    assert answers and result.chosen.kind == "answer"
    best = max(mean_path_value(tree, n.id) for n in answers)
    assert math.isclose(mean_path_value(tree, result.chosen.id), best)
    assert result.answer == result.chosen.state.split("ANSWER:")[-1].strip()


def test_most_visited_follows_the_most_visited_children():
    result, _ = run_mcts(depth=3, n_thoughts=3, iterations=8, output_strategy="most_visited")
    tree = result.tree
    path = result.chosen_path
    for parent, child in zip(path, path[1:]):
        most = max(c.info["visits"] for c in tree.children(parent))
        assert tree.node(child).info["visits"] == most
    assert not any(c.info["visits"] for c in tree.children(path[-1]))


def test_mcts_is_deterministic_for_a_seed():
    first, _ = run_mcts(depth=3, n_thoughts=2, iterations=4, seed=3)
    again, _ = run_mcts(depth=3, n_thoughts=2, iterations=4, seed=3)
    summary = lambda r: [(n.id, n.parent, n.state, n.value, n.info["visits"]) for n in r.tree.nodes()]  # noqa: E731
    assert summary(first) == summary(again)
    assert first.chosen_path == again.chosen_path


@pytest.mark.parametrize("task_name", ["gsm8k", "creative_writing", "blocksworld"])
def test_mcts_runs_each_task_on_the_tiny_pair(tiny_pair, task_name):
    from search_helpers import tiny_config

    from seed_tot.reasoning.prompting import PromptFormatter
    from seed_tot.scheduling.factory import make_executor
    from seed_tot_tasks import get_task

    _, target = tiny_pair
    task = get_task(task_name)
    problem = task.load()[0]
    executor = make_executor("batched", target)
    config = tiny_config(MCTSConfig, iterations=2)
    result = MCTS(task, executor, PromptFormatter(target.tokenizer), config).run(problem)
    assert result.batches and all(batch.size == 2 for batch in result.batches if batch.role == "thought")
    assert all(batch.size <= 2 for batch in result.batches if batch.role == "value")  # k=1; rejected: none
    assert result.tree.root.info["visits"] == 2
    assert max(n.depth for n in result.tree.nodes()) <= 2
    assert all(n.value is not None for n in result.tree.nodes() if n.kind != "root" and not is_chain_of_thought(n))
