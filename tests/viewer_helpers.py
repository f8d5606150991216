"""A hand-built GSM8K trace for the viewer tests: a depth-3 BFS tree with answer leaves, a node
rejected by a rule, one cut off at the token budget, a greedy and a sampled chain of thought,
a vote of 3 to 1, and one thought full of text that must reach the page escaped and intact."""

from __future__ import annotations

import json

from seed_tot.observe.trace import (
    BatchTraceRecord, EdgeRecord, MetricsRecord, NodeRecord, StatsRecord, Trace, write_trace,
)

ODD_THOUGHT = (
    '</script><script>window.__viewer_pwned = 1</script><b class="injected">bold?</b> '
    "<img src=x onerror=\"window.__viewer_pwned = 2\"> 'single' \"double\" & &amp; "
    "unicode: Ünïcödé ✓ 数学 🙂 \u2028line\u2029para\n"
) + "long " * 2000  # 10,000+ characters

STATS = StatsRecord(new_tokens=12, draft_tokens_proposed=8, draft_tokens_accepted=6, target_forwards=7, wall_seconds=0.5)


def _node(id, parent, depth, kind="thought", thought="", value=None, info=None, seeds=None, state=None):
    return NodeRecord(
        id=id,
        parent=parent,
        depth=depth,
        kind=kind,
        state=thought if state is None else state,
        thought=thought,
        value=value,
        value_parsed=None if value is None else True,
        raw_values=[] if value is None else ["Verdict: sure", "Verdict: likely"],
        generation=None if parent is None else STATS,
        evaluation=None if value is None else STATS,
        seeds=seeds if seeds is not None else ({} if parent is None else {"thought": 2**62 + id}),
        info=info or {},
    )


def viewer_trace(thought_of_node_4: str = ODD_THOUGHT) -> Trace:
    nodes = [
        _node(0, None, 0, "root"),
        _node(1, 0, 1, thought="Step one: 16 - 3 = 13 eggs.", value=20.0, info={"bfs_step": 1, "selected": True}),
        _node(2, 0, 1, thought="Step one: 16 + 3 = 19 eggs.", value=1.0, info={"bfs_step": 1, "selected": False}),
        _node(3, 1, 2, thought="13 - 4 = 9 eggs left.", value=13.5, info={"bfs_step": 2, "selected": True}),
        _node(4, 1, 2, thought=thought_of_node_4, value=0.0, info={"bfs_step": 2, "selected": False}),
        _node(5, 3, 3, "answer", thought="9 * 2 = 18. The answer is 18.", value=20.0),
        _node(6, 3, 3, "answer", thought="9 * 2 = 18. The answer is 18.", value=19.0),
        _node(7, 3, 3, "answer", thought="9 * 3 = 20. The answer is 20.", value=2.0,
              info={"rejected": "wrong arithmetic: 9 * 3 = 20"}),
        _node(8, 3, 3, "thought", thought="9 * 2 = 1", value=0.0,
              info={"finish_reason": "length", "rejected": "truncated: the thought hit the token budget"}),
        _node(9, 0, 1, "answer", thought="Greedy chain: 16 - 3 - 4 = 9, 9 * 2 = 18. The answer is 18.",
              info={"cot": True, "finish_reason": "eos"}, seeds={"cot": 17}),
        _node(10, 0, 1, "answer", thought="Sampled chain: the answer is 20.\nThe answer is 20.",
              info={"cot_sample": 1, "finish_reason": "eos"}, seeds={"cot": 18}),
    ]
    edges = [{"source": n.parent, "target": n.id} for n in nodes if n.parent is not None]
    return Trace(
        task="gsm8k",
        search="bfs",
        executor="seed",
        problem_id="gsm8k-viewer",
        question="Janet's ducks lay 16 eggs per day. <How much> does she make?",
        config={"search": {"n_thoughts": 4, "breadth": 1, "vote": True}},
        models={"target": "tiny-target", "draft": "tiny-draft"},
        nodes=nodes,
        edges=edges,
        chosen_path=[0, 1, 3, 5],
        final_answer="18",
        gold="18",
        score=1.0,
        correct=True,
        metrics=MetricsRecord(
            problems=1, new_tokens=120, wall_seconds=5.0, tokens_per_second=24.0, requests=20, batches=6,
            acceptance_rate=0.75, draft_tokens_proposed=80, draft_tokens_accepted=60, target_forwards=70,
            draft_forwards=80, parse_failures=0, evaluations=8,
        ),
        batches=[],
        selection={"answer": "18", "node_id": 5, "method": "vote", "votes": {"18": 3, "20": 1},
                   "cot_answer": "18", "search_answer": "18"},
    )


def wide_trace(branch: int, depth: int) -> Trace:
    """A full tree (`branch` children per node, answer leaves at `depth`) whose chosen path
    follows the first child at every level: the shape of a big MCTS trace."""
    trace = viewer_trace("x")
    nodes, frontier, next_id = [_node(0, None, 0, "root")], [0], 1
    for level in range(1, depth + 1):
        grown = []
        for parent in frontier:
            for _ in range(branch):
                kind = "answer" if level == depth else "thought"
                nodes.append(_node(next_id, parent, level, kind, thought=f"step {level}. The answer is {next_id % 7}.",
                                   value=float(next_id % 5), info={"visits": 1 + next_id % 3, "return_sum": 0.5}))
                grown.append(next_id)
                next_id += 1
        frontier = grown
    chosen = [0]
    for _ in range(depth):
        chosen.append(next(n.id for n in nodes if n.parent == chosen[-1]))
    trace.nodes = nodes
    trace.edges = [EdgeRecord(source=n.parent, target=n.id) for n in nodes if n.parent is not None]
    trace.chosen_path = chosen
    trace.selection = None
    return trace


def write_run(tmp_path, with_results=True):
    """A run directory: two traces, a JSON file that is not a trace, and (with_results) a
    results.jsonl with a row whose trace is missing and a torn last line, and a runs.jsonl."""
    run = tmp_path / "run"
    good, bad = viewer_trace(), viewer_trace()
    bad.problem_id, bad.final_answer, bad.correct, bad.score = "gsm8k-other", "20", False, 0.0
    write_trace(run / "traces" / "gsm8k-viewer.json", good)
    write_trace(run / "traces" / "gsm8k-other.json", bad)
    (run / "bench.json").write_text('{"not": "a trace"}')
    if with_results:
        rows = [
            {"problem_id": "gsm8k-viewer", "method": "seed", "answer": "18", "gold": "18", "correct": True, "new_tokens": 120},
            {"problem_id": "gsm8k-lost", "method": "seed", "answer": "3", "gold": "4", "correct": False, "new_tokens": 90},
        ]
        (run / "results.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n{torn")
        (run / "runs.jsonl").write_text(json.dumps({"problems": 2, "method": "seed", "wall_seconds": 9.0}) + "\n")
    return run


def thought_batch(merged_size: int) -> BatchTraceRecord:
    """The executor call of 3 thought requests that decoded `merged_size` requests in all."""
    return BatchTraceRecord(role="thought", node_id=0, size=3, wall_seconds=300.0, stats=STATS, events=None,
                            merged_size=merged_size)


def crowded_run(tmp_path):
    """A run of ten problems that shared the batch for 300 s (4 tokens/s over the run): each
    problem's 120 tokens over its 300 s read 0.4 tokens/s, which is not a speed."""
    run = tmp_path / "crowded"
    rows = []
    for index in range(10):
        trace = viewer_trace("x")
        trace.problem_id = f"gsm8k-{index}"
        trace.metrics.wall_seconds, trace.metrics.tokens_per_second = 300.0, 0.4
        trace.batches = [thought_batch(merged_size=30)]
        write_trace(run / "traces" / f"{trace.problem_id}.json", trace)
        rows.append({"problem_id": trace.problem_id, "method": "batched", "answer": "18", "gold": "18",
                     "correct": True, "new_tokens": 120, "wall_seconds": 300.0, "tokens_per_second": 0.4})
    (run / "results.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    session = {"problems": 10, "concurrency": 10, "method": "batched", "wall_seconds": 300.0, "new_tokens": 1200,
               "tokens_per_second": 4.0}
    (run / "runs.jsonl").write_text(json.dumps(session) + "\n")
    return run
