"""Many problems at once: merged executor calls, same results as one problem at a time."""

import pytest
from scripted_executor import ScriptedExecutor
from search_helpers import FORMATTER, TOKENIZER, idea_reply, make_task, tiny_config

from seed_tot.scheduling.factory import make_executor
from seed_tot.search import BFS, MCTS, BFSConfig, MCTSConfig
from seed_tot.search.driver import solve_many
from seed_tot.search.steps import Batch, BatchOutcome, gather
from seed_tot.task import Problem

PROBLEMS = [Problem(id=f"p{i}", question=f"What is {i} * 7?", gold=str(7 * i)) for i in range(1, 6)]


def tree_of(result):
    return [(n.id, n.parent, n.kind, n.thought, n.value, n.seeds, n.raw_values) for n in result.tree.nodes()]


def test_gather_merges_pending_batches_and_returns_in_order():
    def steps(name, rounds):
        seen = []
        for index in range(rounds):
            outcome = yield Batch("thought", 0, [name] * (index + 1))
            seen.append(outcome.results)
        return name, seen

    merged = gather([steps("a", 2), steps("b", 1), steps("c", 0)])
    batch = next(merged)
    assert batch.requests == ["a", "b"]  # "c" yields nothing and is done at once
    batch = merged.send(BatchOutcome(results=[1, 2], wall_seconds=1.0))
    assert batch.requests == ["a", "a"]  # "b" finished after its one round
    with pytest.raises(StopIteration) as done:
        merged.send(BatchOutcome(results=[3, 4], wall_seconds=1.0))
    assert done.value.value == [("a", [[1], [3, 4]]), ("b", [[2]]), ("c", [])]


@pytest.mark.parametrize("search", ["bfs", "mcts"])
def test_concurrency_merges_calls_and_keeps_every_result(search):
    cls, config = (BFS, BFSConfig(n_thoughts=2, breadth=2, value_samples=2)) if search == "bfs" else (
        MCTS, MCTSConfig(n_thoughts=2, iterations=3, value_samples=2))
    alone = ScriptedExecutor(TOKENIZER, idea_reply)
    expected = [cls(make_task(3), alone, FORMATTER, config).run(p) for p in PROBLEMS]
    shared = ScriptedExecutor(TOKENIZER, idea_reply)
    found = list(solve_many(cls(make_task(3), None, FORMATTER, config).steps, PROBLEMS, shared, concurrency=3))
    assert sorted(r.problem.id for r in found) == [p.id for p in PROBLEMS]
    by_id = {r.problem.id: r for r in found}
    for result in expected:
        assert tree_of(by_id[result.problem.id]) == tree_of(result)
        assert by_id[result.problem.id].answer == result.answer
    assert len(shared.batches) < len(alone.batches)  # calls were merged
    assert max(len(b) for b in shared.batches) > max(len(b) for b in alone.batches)
    assert sum(len(b) for b in shared.batches) == sum(len(b) for b in alone.batches)  # no request lost or added


@pytest.mark.parametrize("method", ["batched", "batched-lookup"])
def test_the_tiny_pair_gives_the_same_traces_at_any_concurrency(tiny_pair, method):
    """float32 tiny target, sampled thoughts and values: C=1 and C=3 build identical trees."""
    from seed_tot.reasoning.prompting import PromptFormatter
    from tasks import get_task

    _, target = tiny_pair
    task = get_task("gsm8k")
    problems = task.load()[:4]
    config = tiny_config(BFSConfig, breadth=2, seed=3, value_samples=2).model_copy(
        update={"value_decode": tiny_config(BFSConfig).thought_decode})
    search = BFS(task, None, PromptFormatter(target.tokenizer), config)
    trees = {}
    for concurrency in (1, 3):
        executor = make_executor(method, target)
        trees[concurrency] = {r.problem.id: (tree_of(r), r.answer)
                              for r in solve_many(search.steps, problems, executor, concurrency)}
    assert trees[1] == trees[3]
    assert len({thought for tree, _ in trees[1].values() for _, _, _, thought, *_ in tree}) > 4


def test_bad_concurrency_is_refused():
    with pytest.raises(ValueError, match="concurrency"):
        list(solve_many(lambda p: iter(()), PROBLEMS, ScriptedExecutor(TOKENIZER, idea_reply), concurrency=0))
