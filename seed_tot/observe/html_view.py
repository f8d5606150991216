"""A self-contained HTML viewer for traces and runs: one file, inline CSS/JS/SVG, no network.

`trace_page_data` / `run_page_data` build the JSON the page embeds (tested in pure Python);
the page template (viewer.html, package data) draws it in the browser. The data is embedded
in a <script type="application/json"> element with every '<', '>' and '&' escaped, so no
text from a trace can close the element or inject markup; the page only ever writes trace
text with textContent.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from importlib import resources
from pathlib import Path
from typing import Any

from seed_tot.errors import SeedTotError
from seed_tot.observe.trace import StatsRecord, Trace, load_trace
from seed_tot.observe.trace_view import TaskLookup, node_answers
from seed_tot.records import GZIP_SUFFIX, read_json_lines, stored_file, stored_files
from seed_tot.scheduling.events import TARGET, Event, intervals

_DATA_MARK = "/*SEED_TOT_DATA*/"
_GANTT_SPANS = [  # (event that opens a bar, event that closes it, what the bar shows)
    ("draft_start", "draft_end", "draft"),
    ("enqueue", "verify_start", "wait"),
    ("verify_start", "verify_end", "verify"),
    ("prefill_start", "prefill_end", "prefill"),
]


def _stats(record: StatsRecord | None) -> dict | None:
    return None if record is None else record.model_dump()


def _counts_in_vote(node: dict) -> bool:
    return node["kind"] == "answer" and node["rejected"] is None and node["finish_reason"] != "length"


def _vote_panel(trace: Trace, nodes: list[dict]) -> dict | None:
    selection = trace.selection
    if not selection:
        return None
    votes: dict[str, int] = selection.get("votes") or {}
    behind: dict[str, list[int]] = {answer: [] for answer in votes}
    for node in nodes:
        if _counts_in_vote(node) and node["answer"] in behind:
            behind[node["answer"]].append(node["id"])
    winner = selection.get("answer")
    top = max(votes.values(), default=0)
    tied = sorted(answer for answer, count in votes.items() if count == top)
    cot_answer = selection.get("cot_answer")
    greedy = next((node for node in nodes if node["cot"] == "greedy"), None)
    if selection.get("method") == "goal":
        rule = "No vote: the search reached a state the task shows at the goal, and its plan is the answer."
    elif selection.get("method") != "vote":
        rule = "No vote: the node the search chose gives the answer."
    elif len(tied) < 2:
        rule = "Majority: the answer with the most votes wins."
    elif greedy is not None and _counts_in_vote(greedy) and cot_answer in tied:  # a chain that did not vote breaks no tie
        rule = f"Tie between {len(tied)} answers: it goes to the greedy chain of thought's answer."
    else:
        rule = f"Tie between {len(tied)} answers: it goes to the answer whose best node has the highest value."
    answers = [
        {"answer": answer, "votes": count, "nodes": behind[answer], "winner": answer == winner}
        for answer, count in sorted(votes.items(), key=lambda item: (-item[1], item[0]))
    ]
    return {
        "method": selection.get("method"),
        "answers": answers,
        "rule": rule,
        "tied": tied if len(tied) > 1 else [],
        "cot_answer": cot_answer,
        "search_answer": selection.get("search_answer"),
        # recorded by newer traces only; a self-consistency run has no search choice (its node is the root)
        "search_node_id": None if trace.search == "self-consistency" else selection.get("search_node_id"),
        "node_id": selection.get("node_id"),
    }


def scheduler_events(trace: Trace) -> list[Event]:
    """Every batch's scheduler events on one time line (each batch starts after the last one)."""
    events: list[Event] = []
    offset = 0.0
    for batch in trace.batches:
        if not batch.events:
            continue
        batch_events = [Event(**{**e, "time": e["time"] + offset}) for e in batch.events]
        events.extend(batch_events)
        offset = max(e.time for e in batch_events) + 0.05
    return events


def _gantt(trace: Trace) -> dict | None:
    events = scheduler_events(trace)
    bars = []
    for start_kind, end_kind, what in _GANTT_SPANS:
        for worker, request, start, end in intervals(events, start_kind, end_kind):
            row = "target" if what in ("verify", "prefill") or worker == TARGET else f"draft {worker}"
            bars.append({"row": row, "kind": what, "worker": worker, "request": request, "start": start, "end": end})
    if not bars:
        return None
    t0 = min(bar["start"] for bar in bars)
    for bar in bars:
        bar["start"] -= t0
        bar["end"] -= t0
    workers = sorted({bar["row"] for bar in bars if bar["row"] != "target"}, key=lambda r: int(r.split()[1]))
    return {"rows": workers + ["target"], "bars": bars, "seconds": max(bar["end"] for bar in bars)}


def shared_requests(trace: Trace) -> int | None:
    """The most requests of other problems that one of this problem's executor calls decoded beside
    its own: 0 when it had the executor to itself, None when the trace does not record it."""
    if not trace.batches or any(batch.merged_size == 0 for batch in trace.batches):
        return None
    return max(batch.merged_size - batch.size for batch in trace.batches)


def run_speed(sessions: list[dict]) -> dict[str, Any] | None:
    """The run's throughput: every session's tokens over its wall time (runs.jsonl), the speed to
    compare; a problem's own seconds overlap the others' when problems share the batch. None
    without a timed session."""
    seconds = sum(session.get("wall_seconds") or 0 for session in sessions)
    if seconds <= 0:
        return None
    tokens = sum(session.get("new_tokens") or 0 for session in sessions)
    return {"new_tokens": tokens, "wall_seconds": seconds, "tokens_per_second": tokens / seconds,
            "problems": sum(session.get("problems") or 0 for session in sessions)}


def trace_page_data(trace: Trace, task_named: TaskLookup | None = None) -> dict[str, Any]:
    """Everything the page draws for one trace: nodes with their marks, the vote, the schedule."""
    answers = node_answers(trace, task_named)
    chosen = set(trace.chosen_path)
    final_node = (trace.selection or {}).get("node_id", trace.chosen_path[-1] if trace.chosen_path else None)
    nodes = []
    for record in sorted(trace.nodes, key=lambda r: r.id):
        info = dict(record.info)
        cot = "greedy" if info.pop("cot", False) else (
            "sample" if info.get("cot_sample") else ("branch" if info.get("cot_branch") else None))
        visits = info.get("visits")
        nodes.append(
            {
                "id": record.id,
                "parent": record.parent,
                "depth": record.depth,
                "kind": record.kind,
                "thought": record.thought,
                "answer": answers[record.id],
                "value": record.value,
                "value_parsed": record.value_parsed,
                "raw_values": list(record.raw_values),
                "sample_values": info.pop("sample_values", None),
                "generation": _stats(record.generation),
                "evaluation": _stats(record.evaluation),
                "seeds": {role: str(seed) for role, seed in record.seeds.items()},  # JS numbers lose 64-bit seeds
                "finish_reason": info.pop("finish_reason", None),
                "rejected": info.pop("rejected", None),
                "cot": cot,
                "cot_sample": info.pop("cot_sample", None),
                "cot_branch": info.pop("cot_branch", None),
                "branched_from": info.pop("branched_from", None),
                "chosen": record.id in chosen,
                "final": record.id == final_node,
                "visits": visits,
                "q": info["return_sum"] / visits if visits else None,
                "info": info,
            }
        )
    metrics = trace.metrics.model_dump()
    return {
        "task": trace.task,
        "search": trace.search,
        "executor": trace.executor,
        "problem_id": trace.problem_id,
        "question": trace.question,
        "config": trace.config,
        "models": trace.models,
        "chosen_path": list(trace.chosen_path),
        "final_answer": trace.final_answer,
        "gold": trace.gold,
        "score": trace.score,
        "correct": trace.correct,
        "metrics": metrics,
        "shared_requests": shared_requests(trace),
        "nodes": nodes,
        "vote": _vote_panel(trace, nodes),
        "gantt": _gantt(trace),
    }


def _settings(trace: Trace) -> dict[str, Any]:
    """The run's settings as flat 'name: value' pairs (search config first)."""
    flat: dict[str, Any] = {"task": trace.task, "search": trace.search, "executor": trace.executor}
    flat.update({f"model {role}": name for role, name in trace.models.items()})

    def walk(prefix: str, value: Any) -> None:
        if isinstance(value, dict):
            for key, inner in value.items():
                walk(f"{prefix}.{key}" if prefix else key, inner)
        else:
            flat[prefix] = value

    walk("", trace.config)
    return flat


def trace_key(path: str | os.PathLike) -> str:
    """A trace's key in a run's page: its file name without .json or .json.gz (unique in a folder,
    where problem ids are not: the API grows a tree per request, and a question may be asked twice)."""
    return Path(path).name.removesuffix(GZIP_SUFFIX).removesuffix(".json")


def run_page_data(run_dir: str | os.PathLike, task_named: TaskLookup | None = None) -> dict[str, Any]:
    """The run's problems (from results.jsonl, joined with the traces under the run directory)
    and every trace's page data, in results order (traces without a result row last). Rows and
    traces are joined by `key` (trace_key); a row whose problem id other rows share is marked
    `repeated`, so the index can tell them apart."""
    root = Path(run_dir)
    check_one_run(root)
    traces: dict[str, Trace] = {}
    for path in stored_files(root, "*.json"):  # FILE.json or FILE.json.gz
        try:
            traces[trace_key(path)] = load_trace(path)
        except SeedTotError:
            continue  # not a trace (bench results, configs): skipped
    results = read_json_lines(root / "results.jsonl")
    if not traces and not results:
        raise SeedTotError(
            f"{str(root)!r} holds no results.jsonl and no trace files: pass a run directory written by a task run."
        )
    rows = []
    for result in results:
        problem_id = str(result.get("problem_id"))
        key = trace_key(result["trace_path"]) if result.get("trace_path") else problem_id
        rows.append({**result, "problem_id": problem_id, "key": key, "has_trace": key in traces})
    joined = {row["key"] for row in rows}
    for key, trace in traces.items():
        if key not in joined:
            m = trace.metrics
            rows.append(
                {
                    "problem_id": trace.problem_id,
                    "key": key,
                    "method": trace.executor,
                    "answer": trace.final_answer,
                    "gold": trace.gold,
                    "correct": trace.correct,
                    "new_tokens": m.new_tokens,
                    "wall_seconds": m.wall_seconds,
                    "has_trace": True,
                }
            )
    counts = Counter(row["problem_id"] for row in rows)
    for row in rows:
        row["repeated"] = counts[row["problem_id"]] > 1
    judged = [row for row in rows if row.get("correct") is not None]
    sessions = read_json_lines(root / "runs.jsonl")
    first = next(iter(traces.values()), None)
    return {
        "name": root.resolve().name,
        "rows": rows,
        "correct": sum(1 for row in judged if row["correct"]),
        "judged": len(judged),
        "settings": _settings(first) if first else {},
        "runs": sessions,
        "speed": run_speed(sessions),
        "traces": {key: trace_page_data(trace, task_named) for key, trace in traces.items()},
    }


def _embed(data: dict) -> str:
    text = json.dumps(data, ensure_ascii=False, allow_nan=False, default=str)
    for raw, escaped in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("\u2028", "\\u2028"), ("\u2029", "\\u2029")):
        text = text.replace(raw, escaped)
    return text


def render_page(data: dict) -> str:
    """The viewer page with `data` ({"kind": "trace"|"run", ...}) embedded."""
    template = resources.files("seed_tot.observe").joinpath("viewer.html").read_text(encoding="utf-8")
    return template.replace(_DATA_MARK, _embed(data), 1)


def check_one_run(root: Path) -> None:
    """Refuse a folder that holds other runs (their results.jsonl below it): one index of several
    runs would mix their problems under the first trace's settings."""
    nested = sorted(p.parent for p in root.rglob("results.jsonl") if p.parent != root)
    if nested:
        names = ", ".join(str(p) for p in nested[:3]) + (" ..." if len(nested) > 3 else "")
        raise SeedTotError(f"{str(root)!r} holds {len(nested)} other run(s) ({names}): view each run folder on its own.")


def view_data(source: str | os.PathLike, task_named: TaskLookup | None = None) -> dict[str, Any]:
    """Page data for a trace file or a run directory."""
    if not str(source).strip():
        raise SeedTotError("The path is empty: pass a trace file or a run directory.")
    path = Path(source)
    if path.is_dir():
        return {"kind": "run", "run": run_page_data(path, task_named)}
    if not stored_file(path).exists():  # a trace stored compressed is found as FILE.json too
        raise SeedTotError(f"{str(path)!r} does not exist: pass a trace file or a run directory.")
    return {"kind": "trace", "trace": trace_page_data(load_trace(path), task_named)}


def write_view(source: str | os.PathLike, out: str | os.PathLike | None = None, task_named: TaskLookup | None = None) -> Path:
    """Write the viewer page for a trace file or run directory; default path: beside the trace
    (FILE.html, for FILE.json or FILE.json.gz) or inside the run directory (index.html)."""
    path = Path(source)
    data = view_data(path, task_named)
    if out is None:
        out = path / "index.html" if path.is_dir() else path.with_name(path.name.removesuffix(GZIP_SUFFIX)).with_suffix(".html")
    target = Path(out)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(render_page(data), encoding="utf-8")
    return target
