"""The data the HTML viewer embeds, the page's escaping, and `seed-tot trace view` (no browser:
tests/test_html_view_browser.py drives the page in Chromium)."""

import json
import re

from click.testing import CliRunner
from viewer_helpers import ODD_THOUGHT, crowded_run, thought_batch, viewer_trace, write_run

from seed_tot.cli import main
from seed_tot.observe.html_view import render_page, run_page_data, trace_page_data
from seed_tot.observe.trace import write_trace
from seed_tot_tasks import bundled_task


def embedded_data(page: str) -> dict:
    match = re.search(r'<script type="application/json" id="seed-tot-data">(.*?)</script>', page, re.S)
    return json.loads(match.group(1))


def by_id(data: dict) -> dict:
    return {node["id"]: node for node in data["nodes"]}


def test_every_node_is_embedded_with_its_marks():
    data = trace_page_data(viewer_trace(), bundled_task)
    nodes = by_id(data)
    assert sorted(nodes) == list(range(11))
    assert [i for i, n in nodes.items() if n["chosen"]] == [0, 1, 3, 5]
    assert [i for i, n in nodes.items() if n["final"]] == [5]
    assert nodes[9]["cot"] == "greedy" and nodes[10]["cot"] == "sample" and nodes[10]["cot_sample"] == 1
    assert [i for i, n in nodes.items() if n["cot"]] == [9, 10]
    assert nodes[7]["rejected"] == "wrong arithmetic: 9 * 3 = 20"
    assert nodes[8]["finish_reason"] == "length"
    assert {i: n["answer"] for i, n in nodes.items() if n["kind"] == "answer"} == {5: "18", 6: "18", 7: "20", 9: "18", 10: "20"}
    assert nodes[3]["generation"]["draft_tokens_accepted"] == 6 and nodes[3]["raw_values"] == ["Verdict: sure", "Verdict: likely"]
    assert nodes[1]["seeds"] == {"thought": str(2**62 + 1)}  # as text: a JS number would round it
    assert nodes[1]["info"] == {"bfs_step": 1, "selected": True}


def test_vote_panel_lists_each_answer_with_the_nodes_behind_it():
    vote = trace_page_data(viewer_trace(), bundled_task)["vote"]
    # node 7 answered 20 but a rule rejected it: it casts no vote and sits behind no answer
    assert vote["answers"] == [
        {"answer": "18", "votes": 3, "nodes": [5, 6, 9], "winner": True},
        {"answer": "20", "votes": 1, "nodes": [10], "winner": False},
    ]
    assert vote["rule"].startswith("Majority")


def test_tie_rule_names_how_the_tie_was_broken():
    trace = viewer_trace()
    trace.selection = {**trace.selection, "votes": {"18": 2, "20": 2}}
    assert "greedy chain of thought" in trace_page_data(trace, bundled_task)["vote"]["rule"]  # node 9, the greedy chain, answered 18
    trace.nodes[9].info["rejected"] = "wrong arithmetic: 9 * 2 = 20"  # a chain that did not vote breaks no tie
    assert "highest value" in trace_page_data(trace, bundled_task)["vote"]["rule"]
    trace.nodes[9].info.pop("rejected")
    trace.selection = {**trace.selection, "cot_answer": "27"}
    assert "highest value" in trace_page_data(trace, bundled_task)["vote"]["rule"]
    trace.selection = {**trace.selection, "method": "search", "votes": {}}
    vote = trace_page_data(trace, bundled_task)["vote"]
    assert vote["answers"] == [] and vote["rule"].startswith("No vote")


def test_real_trace_every_vote_has_its_nodes():
    """On every committed GSM8K trace, the answers the viewer reads back from the nodes account
    for every recorded vote."""
    from pathlib import Path

    from seed_tot.observe.trace import load_trace
    from seed_tot.records import stored_files

    paths = stored_files(Path(__file__).resolve().parent.parent / "results/gsm8k-31-42/traces", "*.json")
    assert len(paths) == 12
    for path in paths:
        vote = trace_page_data(load_trace(path), bundled_task)["vote"]
        assert vote["answers"] and all(len(a["nodes"]) == a["votes"] for a in vote["answers"]), path.name


def test_mcts_nodes_carry_visits_and_q():
    trace = viewer_trace()
    for node in trace.nodes:
        node.info.update(visits=4, return_sum=2.0)
    node = trace_page_data(trace, bundled_task)["nodes"][1]
    assert node["visits"] == 4 and node["q"] == 0.5


def test_scheduler_events_become_gantt_bars_on_one_time_line():
    trace = viewer_trace()
    from seed_tot.observe.trace import BatchTraceRecord

    def batch(events):
        return BatchTraceRecord(role="thought", node_id=0, size=1, wall_seconds=1.0, stats=trace.nodes[1].generation, events=events)

    first = [
        {"time": 0.0, "kind": "prefill_start", "worker": -1, "request": 0, "tokens": 0},
        {"time": 0.1, "kind": "prefill_end", "worker": -1, "request": 0, "tokens": 0},
        {"time": 0.1, "kind": "draft_start", "worker": 0, "request": 0, "tokens": 0},
        {"time": 0.3, "kind": "draft_end", "worker": 0, "request": 0, "tokens": 0},
        {"time": 0.3, "kind": "enqueue", "worker": 0, "request": 0, "tokens": 0},
        {"time": 0.4, "kind": "verify_start", "worker": 0, "request": 0, "tokens": 0},
        {"time": 0.6, "kind": "verify_end", "worker": 0, "request": 0, "tokens": 0},
    ]
    second = [{"time": 0.0, "kind": "draft_start", "worker": 1, "request": 1}, {"time": 0.5, "kind": "draft_end", "worker": 1, "request": 1}]
    trace.batches = [batch(first), batch(None), batch(second)]
    gantt = trace_page_data(trace, bundled_task)["gantt"]
    assert gantt["rows"] == ["draft 0", "draft 1", "target"]
    kinds = sorted((bar["row"], bar["kind"]) for bar in gantt["bars"])
    assert kinds == [("draft 0", "draft"), ("draft 0", "wait"), ("draft 1", "draft"), ("target", "prefill"), ("target", "verify")]
    second_batch = next(bar for bar in gantt["bars"] if bar["row"] == "draft 1")
    assert second_batch["start"] >= 0.6  # the second batch starts after the first one ended
    assert trace_page_data(viewer_trace(), bundled_task)["gantt"] is None


def test_odd_text_is_escaped_in_the_page_and_arrives_intact():
    trace = viewer_trace()
    page = render_page({"kind": "trace", "trace": trace_page_data(trace, bundled_task)})
    data_part = re.search(r'id="seed-tot-data">(.*?)</script>', page, re.S).group(1)
    assert "<" not in data_part and ">" not in data_part and "\u2028" not in data_part
    assert page.count("</script>") == 2  # the data element's and the code's: the thought closes nothing
    assert by_id(embedded_data(page)["trace"])[4]["thought"] == ODD_THOUGHT
    assert "https://" not in page and "http://" not in page.replace("http://www.w3.org/2000/svg", "")


def test_run_index_joins_results_with_traces(tmp_path):
    data = run_page_data(write_run(tmp_path), bundled_task)
    assert [(r["problem_id"], r["has_trace"]) for r in data["rows"]] == [
        ("gsm8k-viewer", True), ("gsm8k-lost", False), ("gsm8k-other", True)]
    assert (data["correct"], data["judged"]) == (1, 3)
    assert sorted(data["traces"]) == ["gsm8k-other", "gsm8k-viewer"]
    assert data["settings"]["search.n_thoughts"] == 4 and data["settings"]["model draft"] == "tiny-draft"
    assert data["runs"] == [{"problems": 2, "method": "seed", "wall_seconds": 9.0}]
    only_traces = run_page_data(write_run(tmp_path / "b", with_results=False), bundled_task)
    assert {r["problem_id"]: r["correct"] for r in only_traces["rows"]} == {"gsm8k-other": False, "gsm8k-viewer": True}


def test_a_question_asked_twice_keeps_both_trees_in_the_index(tmp_path):
    # the API's folder: one trace per request, named by its trace id; one question asked twice
    first, second = viewer_trace(), viewer_trace()
    second.final_answer, second.correct = "20", False
    write_trace(tmp_path / "api" / "traces" / "api-abc-0001.json", first)
    write_trace(tmp_path / "api" / "traces" / "api-abc-0002.json", second)
    data = run_page_data(tmp_path / "api", bundled_task)
    assert sorted(data["traces"]) == ["api-abc-0001", "api-abc-0002"]
    assert [(r["problem_id"], r["key"], r["repeated"], r["answer"]) for r in data["rows"]] == [
        ("gsm8k-viewer", "api-abc-0001", True, "18"), ("gsm8k-viewer", "api-abc-0002", True, "20")]
    assert not any(r["repeated"] for r in run_page_data(write_run(tmp_path), bundled_task)["rows"])


def test_a_problem_that_shared_the_batch_is_marked_and_the_run_has_one_speed(tmp_path):
    data = run_page_data(crowded_run(tmp_path), bundled_task)
    assert data["speed"] == {"new_tokens": 1200, "wall_seconds": 300.0, "tokens_per_second": 4.0, "problems": 10}
    assert {trace["shared_requests"] for trace in data["traces"].values()} == {27}
    alone = viewer_trace()
    alone.batches = [thought_batch(merged_size=3)]
    assert trace_page_data(alone)["shared_requests"] == 0
    assert trace_page_data(viewer_trace())["shared_requests"] is None  # no batches recorded: unknown
    assert run_page_data(write_run(tmp_path / "no-speed", with_results=False))["speed"] is None


def test_cli_writes_one_page_for_a_trace_and_for_a_run(tmp_path):
    run = write_run(tmp_path)
    result = CliRunner().invoke(main, ["trace", "view", str(run / "traces" / "gsm8k-viewer.json")])
    assert result.exit_code == 0, result.output
    page = (run / "traces" / "gsm8k-viewer.html").read_text()
    assert embedded_data(page)["kind"] == "trace"
    out = tmp_path / "out" / "index.html"
    result = CliRunner().invoke(main, ["trace", "view", str(run), "-o", str(out)])
    assert result.exit_code == 0 and str(out) in result.output
    assert sorted(embedded_data(out.read_text())["run"]["traces"]) == ["gsm8k-other", "gsm8k-viewer"]


def test_cli_bad_input_is_one_sentence(tmp_path):
    (tmp_path / "notes.json").write_text('{"hello": 1}')
    (tmp_path / "empty").mkdir()
    for source, says in [
        (tmp_path / "missing.json", "does not exist"),
        (tmp_path / "notes.json", "is not a seed-tot trace"),
        (tmp_path / "empty", "no results.jsonl and no trace files"),
        ("", "The path is empty"),
        (write_run(tmp_path / "runs" / "a").parent.parent, "holds 1 other run(s)"),
    ]:
        result = CliRunner().invoke(main, ["trace", "view", str(source)])
        assert result.exit_code == 2, result.output
        assert "Traceback" not in result.output and says in result.output
        assert len(result.output.strip().splitlines()) == 1


def test_png_plot_labels_answers_and_sets_chains_of_thought_apart(tmp_path, monkeypatch):
    from matplotlib.figure import Figure

    from seed_tot.observe.trace_view import plot_tree

    saved = []
    real_savefig = Figure.savefig
    monkeypatch.setattr(Figure, "savefig", lambda self, *a, **k: (saved.append(self), real_savefig(self, *a, **k))[1])
    plot_tree(viewer_trace(), tmp_path / "tree.png", bundled_task)
    axes = saved[0].axes[0]
    labels = [text.get_text() for text in axes.texts]
    assert sorted(label for label in labels if label in ("18", "20")) == ["18", "18", "18", "20", "20"]  # nodes 5, 6, 9; 7, 10
    assert "chains of thought" in labels
    positions = {int(t.get_text()): t.get_position() for t in axes.texts if t.get_text().isdigit() and len(t.get_text()) <= 2 and t.get_color() == "white"}
    tree_right = max(x for node, (x, _) in positions.items() if node not in (9, 10))
    assert min(positions[9][0], positions[10][0]) > tree_right  # the chains sit to the right of the tree


def test_a_self_consistency_trace_names_no_search_choice():
    trace = viewer_trace()
    trace.search, trace.selection["search_node_id"] = "self-consistency", 0  # its search node is the root
    assert trace_page_data(trace)["vote"]["search_node_id"] is None
    assert trace_page_data(viewer_trace())["vote"]["search_node_id"] is None  # an older trace records none
