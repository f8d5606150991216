import json
import os

import pytest
from scripted_executor import ScriptedExecutor
from search_helpers import FORMATTER, PROBLEM, TOKENIZER, idea_reply, make_task

from seed_tot.api import to_trace
from seed_tot.errors import SeedTotError
from seed_tot.search import BFS, MCTS, BFSConfig, MCTSConfig
from seed_tot.observe.trace import TRACE_SCHEMA_VERSION, Trace, load_trace, tree_from_trace, write_trace

TIMING_KEYS = {"wall_seconds", "tokens_per_second", "time"}


def search_trace(search="bfs", events=False, seed=0):
    task = make_task(3)
    executor = ScriptedExecutor(TOKENIZER, idea_reply, events=events)
    if search == "bfs":
        result = BFS(task, executor, FORMATTER, BFSConfig(n_thoughts=3, breadth=2, seed=seed)).run(PROBLEM)
    else:
        result = MCTS(task, executor, FORMATTER, MCTSConfig(n_thoughts=2, iterations=4, seed=seed)).run(PROBLEM)
    return result, to_trace(result, task, executor, models={"target": "scripted"}, extra_config={"note": "test"})


def without_timings(value):
    if isinstance(value, dict):
        return {k: without_timings(v) for k, v in value.items() if k not in TIMING_KEYS}
    if isinstance(value, list):
        return [without_timings(v) for v in value]
    return value


@pytest.mark.parametrize("search", ["bfs", "mcts"])
def test_trace_round_trip_rebuilds_the_tree(tmp_path, search):
    result, trace = search_trace(search)
    path = write_trace(tmp_path / "traces" / "p1.json", trace)
    loaded = load_trace(path)
    assert loaded == trace
    assert loaded.schema_version == TRACE_SCHEMA_VERSION
    rebuilt = tree_from_trace(loaded)
    assert list(rebuilt.nodes()) == list(result.tree.nodes())
    assert rebuilt.edges() == result.tree.edges()
    assert loaded.chosen_path == result.chosen_path and loaded.final_answer == result.answer
    assert loaded.search == search and loaded.executor == "scripted" and loaded.task == "custom"
    assert loaded.config["search"]["n_thoughts"] == result.config.n_thoughts and loaded.config["note"] == "test"
    assert loaded.metrics.new_tokens == sum(b.stats.new_tokens for b in loaded.batches) > 0
    assert loaded.metrics.requests == len(loaded.nodes) - 1 + sum(b.size for b in loaded.batches if b.role == "value")
    assert loaded.gold == "42" and loaded.correct is False


def test_same_run_twice_gives_the_same_trace_except_timings(tmp_path):
    first = write_trace(tmp_path / "a.json", search_trace("bfs")[1])
    second = write_trace(tmp_path / "b.json", search_trace("bfs")[1])
    other = write_trace(tmp_path / "c.json", search_trace("bfs", seed=5)[1])
    load = lambda p: without_timings(json.loads(p.read_text()))  # noqa: E731
    assert load(first) == load(second)
    assert load(first) != load(other)


def test_scheduler_events_are_recorded_per_batch():
    _, trace = search_trace("bfs", events=True)
    assert all(batch.events and len(batch.events) == batch.size for batch in trace.batches)
    assert trace.batches[0].events[0]["kind"] == "verify"
    _, plain = search_trace("bfs", events=False)
    assert all(batch.events is None for batch in plain.batches)


def test_write_is_atomic(tmp_path, monkeypatch):
    _, trace = search_trace("bfs")
    path = write_trace(tmp_path / "t.json", trace)
    before = path.read_text()

    def failing_replace(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", failing_replace)
    changed = trace.model_copy(update={"final_answer": "changed"})
    with pytest.raises(OSError):
        write_trace(path, changed)
    assert path.read_text() == before
    assert [p.name for p in tmp_path.iterdir()] == ["t.json"]  # no temporary file left behind


def test_bad_trace_files_give_one_clear_error(tmp_path):
    with pytest.raises(SeedTotError, match="does not exist"):
        load_trace(tmp_path / "missing.json")
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(SeedTotError, match="not valid JSON"):
        load_trace(tmp_path / "bad.json")
    _, trace = search_trace("bfs")
    data = json.loads(trace.model_dump_json())
    data["schema_version"] = 99
    (tmp_path / "future.json").write_text(json.dumps(data))
    with pytest.raises(SeedTotError, match="schema version 99"):
        load_trace(tmp_path / "future.json")
    data["schema_version"] = TRACE_SCHEMA_VERSION
    del data["nodes"][0]["state"]
    (tmp_path / "broken.json").write_text(json.dumps(data))
    with pytest.raises(SeedTotError, match="nodes.0.state"):
        load_trace(tmp_path / "broken.json")


def test_schema_is_documented():
    doc = (os.path.dirname(__file__) + "/../docs/api.md")
    text = open(doc, encoding="utf-8").read()
    for name in Trace.model_fields:
        assert f"`{name}`" in text, f"trace field {name} is not documented in docs/api.md"


def test_tiny_pair_run_twice_gives_the_same_trace_except_timings(tiny_pair, tmp_path):
    from search_helpers import tiny_config

    from seed_tot.reasoning.prompting import PromptFormatter
    from seed_tot.scheduling.factory import make_executor
    from seed_tot_tasks import get_task

    _, target = tiny_pair
    task = get_task("gsm8k")
    problem = task.load()[0]

    def traced(name):
        executor = make_executor("batched", target)
        result = BFS(task, executor, PromptFormatter(target.tokenizer), tiny_config(BFSConfig, seed=11)).run(problem)
        return json.loads(write_trace(tmp_path / name, to_trace(result, task, executor)).read_text())

    first, second = traced("a.json"), traced("b.json")
    assert without_timings(first) == without_timings(second)
    assert len({n["thought"] for n in first["nodes"]}) > 2  # sampled thoughts differ between seeds


def test_seed_executor_events_reach_the_trace_and_greedy_trees_match_ar(tiny_pair):
    """The real SEED executor (one spawned draft worker): its scheduler events are recorded per
    batch, and in greedy decoding it builds exactly the tree plain AR builds."""
    from search_helpers import tiny_config

    from seed_tot.config import DecodeConfig
    from seed_tot.reasoning.prompting import PromptFormatter
    from seed_tot.scheduling.factory import make_executor
    from seed_tot_tasks import get_task

    draft, target = tiny_pair
    task = get_task("gsm8k")
    problem = task.load()[0]
    config = tiny_config(BFSConfig, breadth=1).model_copy(
        update={"thought_decode": DecodeConfig(max_new_tokens=8, temperature=0.0)}
    )
    formatter = PromptFormatter(target.tokenizer)
    ar = BFS(task, make_executor("ar", target), formatter, config).run(problem)
    executor = make_executor("seed", target, draft, num_workers=1)
    try:
        seed = BFS(task, executor, formatter, config).run(problem)
        trace = to_trace(seed, task, executor)
    finally:
        executor.close()
    summary = lambda r: [(n.id, n.parent, n.thought, n.value) for n in r.tree.nodes()]  # noqa: E731
    assert summary(seed) == summary(ar)
    assert all(batch.events for batch in trace.batches)
    assert {"time", "kind"} <= set(trace.batches[0].events[0])
    assert trace.metrics.draft_tokens_proposed > 0 and trace.metrics.acceptance_rate is not None
    assert trace.models == {"target": "tiny-target", "draft": "tiny-draft"}
