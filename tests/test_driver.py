"""Many problems at once: merged executor calls, same results as one problem at a time."""

import pytest
from scripted_executor import ScriptedExecutor
from search_helpers import FORMATTER, TOKENIZER, idea_reply, make_task, tiny_config

from seed_tot.config import DecodeConfig
from seed_tot.scheduling.factory import make_executor
from seed_tot.scheduling.seed.worker import TinyDraft
from seed_tot.search import BFS, MCTS, BFSConfig, MCTSConfig
from seed_tot.search.driver import solve_many
from seed_tot.search.steps import Batch, drive, gather
from seed_tot.task import Problem

PROBLEMS = [Problem(id=f"p{i}", question=f"What is {i} * 7?", gold=str(7 * i)) for i in range(1, 6)]


def tree_of(result):
    return [(n.id, n.parent, n.kind, n.thought, n.value, n.seeds, n.raw_values) for n in result.tree.nodes()]


class RecordingExecutor:
    """Answers request r with r * 10 and records every call."""

    name = "recording"

    def __init__(self):
        self.calls = []

    def run(self, requests):
        self.calls.append(list(requests))
        return [r * 10 for r in requests]


def test_gather_merges_pending_batches_and_returns_in_order():
    def steps(name, rounds):
        seen = []
        for index in range(rounds):
            outcome = yield Batch("thought", 0, [name] * (index + 1))
            seen.append(outcome.results)
        return name, seen

    def outer():
        values = yield from gather([steps(1, 2), steps(2, 1), steps(3, 0)])
        outcome = yield Batch("value", 0, [4])
        return values, outcome.results

    executor = RecordingExecutor()
    values, last = drive(outer(), executor)
    assert executor.calls == [[1, 2], [1, 1], [4]]  # 3 asks for nothing; 2 ends after its one round
    assert values == [(1, [[10], [10, 10]]), (2, [[20]]), (3, [])]
    assert last == [40]


def test_forks_nest_and_empty_forks_return_at_once():
    def leaf(value):
        outcome = yield Batch("thought", 0, [value])
        return outcome.results[0]

    def middle():
        empty = yield from gather([])
        inner = yield from gather([leaf(1), leaf(2)])
        return empty, inner

    executor = RecordingExecutor()
    assert drive(gather([middle(), leaf(3)]), executor) == [([], [10, 20]), 30]
    assert executor.calls == [[1, 2, 3]]


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


class SessionSpy:
    """Passes everything to `inner` and keeps the sessions it opens."""

    def __init__(self, inner):
        self.inner, self.sessions = inner, []
        self.name = inner.name

    def run(self, requests):
        return self.inner.run(requests)

    def session(self):
        self.sessions.append(self.inner.session())
        return self.sessions[-1]

    def close(self):
        self.inner.close()


def executor_for(method, target):
    if method == "seed":  # two spawned draft workers, drafts of every search verified in one forward
        return make_executor(method, target, TinyDraft(seed=0), num_workers=2, batched_verify=True, share_prefix=True)
    return make_executor(method, target)


@pytest.mark.parametrize("method", ["batched", "batched-lookup", "seed"])
def test_the_tiny_pair_gives_the_same_traces_at_any_concurrency_and_batching(tiny_pair, method):
    """float32 tiny target, sampled thoughts and values: C=1 and C=3, rounds or continuous
    batching, build identical trees."""
    from seed_tot.reasoning.prompting import PromptFormatter
    from seed_tot_tasks import get_task

    _, target = tiny_pair
    task = get_task("gsm8k")
    problems = task.load()[:4]
    config = tiny_config(BFSConfig, breadth=2, seed=3, value_samples=2).model_copy(
        update={"value_decode": tiny_config(BFSConfig).thought_decode, "cot_decode": DecodeConfig(max_new_tokens=24)})
    search = BFS(task, None, PromptFormatter(target.tokenizer), config)
    trees = {}
    inner = executor_for(method, target)  # one executor for the three runs, as one CLI run uses one (SEED: one worker pool)
    try:
        for concurrency, continuous in [(1, False), (3, False), (3, True)]:
            executor = SessionSpy(inner)
            results = list(solve_many(search.steps, problems, executor, concurrency, continuous=continuous))
            trees[concurrency, continuous] = {r.problem.id: (tree_of(r), r.answer) for r in results}
            assert bool(executor.sessions) == continuous
            if method == "seed" and continuous:  # the scheduler's events reach the trace, numbered within each batch
                events = [e for r in results for b in r.batches for e in b.events]
                assert {e["kind"] for e in events} >= {"draft_start", "verify_end", "prefill_start"}
                assert all(0 <= e["request"] < b.size for r in results for b in r.batches for e in b.events)
    finally:
        inner.close()
    assert trees[1, False] == trees[3, False] == trees[3, True]
    assert executor.sessions[0].joins_while_busy > 0  # searches joined a batch other rows were decoding
    assert len({thought for tree, _ in trees[1, False].values() for _, _, _, thought, *_ in tree}) > 4


def test_bad_concurrency_is_refused():
    with pytest.raises(ValueError, match="concurrency"):
        list(solve_many(lambda p: iter(()), PROBLEMS, ScriptedExecutor(TOKENIZER, idea_reply), concurrency=0))
