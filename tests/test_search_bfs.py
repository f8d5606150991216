import pytest
from conftest import requires_real_models
from scripted_executor import ScriptedExecutor
from search_helpers import FORMATTER, PROBLEM, TOKENIZER, idea_reply, make_task, value_of

from seed_tot.errors import ConfigError
from seed_tot.search import BFS, BFSConfig, MCTSConfig
from seed_tot.search.answers import is_chain_of_thought


def run_bfs(reply=idea_reply, depth=3, **config):
    executor = ScriptedExecutor(TOKENIZER, reply)
    result = BFS(make_task(depth), executor, FORMATTER, BFSConfig(**config)).run(PROBLEM)
    return result, executor


def test_every_step_sends_all_thoughts_then_all_evaluations():
    result, executor = run_bfs(n_thoughts=3, breadth=2, value_samples=2)
    # step 0 expands the root; steps 1 and 2 expand the 2 kept states in ONE batch of b*n.
    assert len(executor.batches) == 2 * 3
    assert [b.size for b in result.batches] == [3, 6, 6, 12, 6, 12]
    for thoughts, values in zip(executor.batches[0::2], executor.batches[1::2]):
        states = len(thoughts) // 3
        assert len({tuple(r.prompt_ids) for r in thoughts}) == states  # one prompt per expanded state
        assert len({r.seed for r in thoughts}) == 3 * states  # n seeds each
        assert len({tuple(r.prompt_ids) for r in values}) == 3 * states  # one prompt per new state
        assert len({r.seed for r in values}) == len(values) == 2 * 3 * states  # k samples, own seeds
    assert [b.role for b in result.batches] == ["thought", "value"] * 3
    assert result.metrics.batches == 6 and result.metrics.requests == 45


def test_bfs_keeps_the_best_states_and_answers_from_the_best():
    result, _ = run_bfs(n_thoughts=3, breadth=2)
    tree = result.tree
    for step in range(3):
        candidates = [n for n in tree.nodes() if n.info.get("bfs_step") == step]
        kept = sorted((n for n in candidates if n.info["selected"]), key=lambda n: n.id)
        best = sorted(candidates, key=lambda n: (-n.value, n.id))[:2]
        assert kept == sorted(best, key=lambda n: n.id)
    for node in tree.nodes():
        if node.kind != "root":
            assert node.value == value_of(node.state)
            assert node.value_parsed
    chosen = result.chosen
    assert chosen.depth == 3
    last_step = [n for n in tree.nodes() if n.info.get("bfs_step") == 2]
    assert chosen.value == max(n.value for n in last_step)
    assert result.chosen_path == tree.path_to(chosen.id)
    assert result.answer is None  # no state matched the answer pattern
    assert result.score == 0.0 and result.correct is False


def test_bfs_stops_when_every_kept_state_holds_an_answer():
    def reply(prompt, request):
        return "ANSWER: 42" if prompt.startswith("THINK") else "7"

    result, executor = run_bfs(reply, depth=4, n_thoughts=2, breadth=2)
    assert len(executor.batches) == 2  # one expansion, then all states are terminal
    assert all(n.kind == "answer" for n in result.tree.nodes() if n.kind != "root")
    assert result.answer == "42" and result.score == 1.0 and result.correct is True


def test_terminal_states_are_kept_but_not_expanded():
    def reply(prompt, request):
        if prompt.startswith("THINK"):
            return "ANSWER: 42" if request.seed % 2 == 0 and "step 1:" in prompt else f"idea{request.seed % 1000}"
        return "9" if "ANSWER" in prompt else "1"

    result, executor = run_bfs(reply, depth=3, n_thoughts=4, breadth=2)
    answers = [n for n in result.tree.nodes() if n.kind == "answer"]
    assert answers, "the scripted seeds should produce at least one answer at step 1"
    for node in answers:
        assert result.tree.children(node.id) == []
    assert result.chosen.kind == "answer" and result.answer == "42"


def test_unparseable_values_get_the_fallback_and_are_counted():
    def reply(prompt, request):
        return f"idea{request.seed % 7}" if prompt.startswith("THINK") else "no idea at all"

    result, _ = run_bfs(reply, depth=2, n_thoughts=3, breadth=1)
    rated = [n for n in result.tree.nodes() if n.kind != "root"]
    assert len(rated) == 6
    assert all(n.value == -1.0 and n.value_parsed is False for n in rated)
    assert all(n.raw_values == ["no idea at all"] * 3 for n in rated)  # k = 3 samples by default
    assert result.metrics.parse_failures == 6 and result.metrics.evaluations == 6


def test_depth_defaults_to_the_task_depth():
    result, _ = run_bfs(depth=2, n_thoughts=2)
    assert max(n.depth for n in result.tree.nodes()) == 2
    result, _ = run_bfs(depth=5, n_thoughts=2)
    assert max(n.depth for n in result.tree.nodes()) == 5


def test_config_depth_overrides_the_task_depth():
    executor = ScriptedExecutor(TOKENIZER, idea_reply)
    result = BFS(make_task(5), executor, FORMATTER, BFSConfig(n_thoughts=2, depth=1)).run(PROBLEM)
    assert max(n.depth for n in result.tree.nodes()) == 1 and len(executor.batches) == 2


def test_seeds_depend_on_the_run_seed_and_not_on_the_schedule():
    first, _ = run_bfs(n_thoughts=3, breadth=2, seed=0)
    again, _ = run_bfs(n_thoughts=3, breadth=2, seed=0)
    other, _ = run_bfs(n_thoughts=3, breadth=2, seed=1)
    states = lambda r: [(n.id, n.state, n.value, n.seeds) for n in r.tree.nodes()]  # noqa: E731
    assert states(first) == states(again)
    assert states(first) != states(other)


def test_wrong_config_type_is_a_clear_error():
    with pytest.raises(ConfigError, match="BFSConfig"):
        BFS(make_task(), ScriptedExecutor(TOKENIZER, idea_reply), FORMATTER, MCTSConfig())
    with pytest.raises(Exception):
        BFSConfig(breadth=0)


@pytest.mark.parametrize("task_name", ["gsm8k", "creative_writing", "blocksworld"])
def test_bfs_runs_each_task_on_the_tiny_pair(tiny_pair, task_name):
    from search_helpers import tiny_config

    from seed_tot.reasoning.prompting import PromptFormatter
    from seed_tot.scheduling.factory import make_executor
    from seed_tot_tasks import get_task

    _, target = tiny_pair
    task = get_task(task_name)
    problem = task.load()[0]
    executor = make_executor("batched", target)
    result = BFS(task, executor, PromptFormatter(target.tokenizer), tiny_config(BFSConfig, breadth=2)).run(problem)
    cot = [n for n in result.tree.nodes() if n.info.get("cot")]
    samples = [n for n in result.tree.nodes() if n.info.get("cot_sample")]
    assert (len(cot), len(samples)) == ((1, 4) if task.cot_prompt is not None else (0, 0))  # default: 4 samples
    rated = [n for n in result.tree.nodes() if n.kind != "root" and not is_chain_of_thought(n)]
    assert rated and all(n.value is not None for n in rated)
    thought_sizes = [b.size for b in result.batches if b.role == "thought"]
    assert thought_sizes[0] == 2 and sum(thought_sizes) == len(rated)
    value_requests = sum(b.size for b in result.batches if b.role == "value")
    assert value_requests == sum(len(n.raw_values) for n in rated)
    for node in rated:  # a rejected state sends no evaluator request; the others send one each (k=1)
        assert len(node.raw_values) == (0 if "rejected" in node.info else 1)
        if node.info["finish_reason"] == "length":
            assert "rejected" in node.info
    assert result.metrics.parse_failures == sum(1 for n in rated if not n.value_parsed)
    assert result.metrics.new_tokens == sum(
        n.generation.new_tokens + n.evaluation.new_tokens for n in rated) + sum(n.generation.new_tokens for n in cot + samples)
    assert result.score in (None, 0.0) or 0.0 <= result.score <= 1.0


def test_the_schedule_does_not_change_the_tree(tiny_pair):
    """Serial and batched AR decode the same seeded requests: the sampled trees are identical."""
    from search_helpers import tiny_config

    from seed_tot.reasoning.prompting import PromptFormatter
    from seed_tot.scheduling.factory import make_executor
    from seed_tot_tasks import get_task

    _, target = tiny_pair
    task = get_task("gsm8k")
    problem = task.load()[0]
    config = tiny_config(BFSConfig, breadth=2, seed=4)
    trees = []
    for executor in (make_executor("ar", target), make_executor("batched", target)):
        result = BFS(task, executor, PromptFormatter(target.tokenizer), config).run(problem)
        trees.append([(n.id, n.parent, n.thought, n.value, n.seeds) for n in result.tree.nodes()])
    assert trees[0] == trees[1]
    assert len({thought for _, _, thought, _, _ in trees[0]}) > 2


def test_solve_turns_bad_options_into_one_clear_error():
    from seed_tot.api import solve

    with pytest.raises(ConfigError, match="breadth"):
        solve(make_task(), PROBLEM, ScriptedExecutor(TOKENIZER, idea_reply), TOKENIZER, search="bfs", breadth=0)
    with pytest.raises(ConfigError, match="Unknown search"):
        solve(make_task(), PROBLEM, ScriptedExecutor(TOKENIZER, idea_reply), TOKENIZER, search="astar")
    result = solve(make_task(2), PROBLEM, ScriptedExecutor(TOKENIZER, idea_reply), TOKENIZER, search="mcts",
                   n_thoughts=2, iterations=2)
    assert result.search == "mcts" and result.tree.root.info["visits"] == 2


@requires_real_models
def test_bfs_on_gsm8k_with_the_real_target():
    """Opt-in: the default target writes thoughts and ratings the GSM8K task can mostly read."""
    from seed_tot.api import solve
    from seed_tot.config import DecodeConfig
    from seed_tot.models import load_model
    from seed_tot.scheduling.factory import make_executor
    from seed_tot_tasks import get_task

    target = load_model("default-target")
    task = get_task("gsm8k")
    problem = task.load()[0]
    result = solve(
        task, problem, make_executor("batched", target), target, search="bfs", n_thoughts=3, depth=2,
        thought_decode=DecodeConfig(max_new_tokens=64, temperature=0.7),
        value_decode=DecodeConfig(max_new_tokens=16),
    )
    rated = [n for n in result.tree.nodes() if n.kind != "root"]
    assert len(rated) == 6 and all(n.thought for n in rated)
    assert result.metrics.parse_failures <= len(rated) // 2
