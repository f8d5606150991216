"""Accuracy of a task run, answer by answer: the tree's final (voted) answer, the CoT candidate
alone (one greedy chain of thought of the same target, run inside the same search), the vote of
the chains of thought alone (greedy + sampled, self-consistency), the search's own choice, and
the tree's vote without any chain of thought.

    python scripts/quality_report.py runs/quality-gsm8k [--task gsm8k]

Reads OUT/results.jsonl and the traces it names; prints a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from seed_tot.search.answers import is_chain_of_thought, select_answer  # noqa: E402
from seed_tot.observe.trace import load_trace, tree_from_trace  # noqa: E402
from tasks import get_task  # noqa: E402
from seed_tot.task import Problem  # noqa: E402


def vote_of(task, problem, trace, keep) -> str | None:
    """The vote over the answer nodes for which keep(node) holds (None: no such node votes)."""
    selection = select_answer(task, problem, tree_from_trace(trace), trace.chosen_path[-1], vote=True, keep=keep)
    return selection.answer if selection.method == "vote" else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--task", default="gsm8k")
    args = parser.parse_args()
    task = get_task(args.task)
    rows = [json.loads(line) for line in (args.out / "results.jsonl").read_text().splitlines() if line.strip()]
    known = {p.id: p for p in task.load()}
    counts = {"final": 0, "cot": 0, "cot_vote": 0, "search": 0, "tree_vote": 0}
    tokens = seconds = 0.0
    for row in rows:
        # the run folder may have moved: read the trace by its path inside OUT/traces/
        trace = load_trace(args.out / "traces" / row["trace_path"].rsplit("/traces/", 1)[-1])
        # the task's own problem (scoring may need its data, e.g. Blocksworld's PDDL), else the trace's
        problem = known.get(trace.problem_id) or Problem(id=trace.problem_id, question=trace.question, gold=trace.gold)
        selection = trace.selection or {}
        answers = {
            "final": row["answer"],
            "cot": selection.get("cot_answer"),
            "cot_vote": vote_of(task, problem, trace, is_chain_of_thought) or selection.get("cot_answer"),
            "search": selection.get("search_answer"),
            # no uncut answer leaf to vote on: the search's own choice answers
            "tree_vote": vote_of(task, problem, trace, lambda node: not is_chain_of_thought(node)) or selection.get("search_answer"),
        }
        for name, answer in answers.items():
            counts[name] += task.score(problem, answer) == 1.0
        tokens += row["new_tokens"]
        seconds += row["wall_seconds"]
        print(f"{row['problem_id']}: gold {row['gold']} | " + ", ".join(f"{k} {v}" for k, v in answers.items()))
    n = len(rows)
    print()
    print("| problems | ToT final (vote + CoTs) | greedy CoT alone | CoTs' vote alone | search's own choice "
          "| tree vote without CoTs | tokens / problem | run wall s / problem |")
    print("|---|---|---|---|---|---|---|---|")
    cells = [f"{counts[k]}/{n} ({counts[k] / n:.0%})" for k in ("final", "cot", "cot_vote", "search", "tree_vote")]
    print(f"| {n} | " + " | ".join(cells) + f" | {tokens / n:.0f} | {run_wall_per_problem(args.out, seconds / n)} |")


def run_wall_per_problem(out: Path, executor_seconds: float) -> str:
    """Wall time per problem from the runs' own clocks (OUT/runs.jsonl); under --concurrency the
    per-problem executor seconds overlap, so they are only the fallback for older runs."""
    path = out / "runs.jsonl"
    runs = [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []
    problems = sum(r["problems"] for r in runs)
    if not problems:
        return f"{executor_seconds:.0f} (executor calls)"
    return f"{sum(r['wall_seconds'] for r in runs) / problems:.0f}"


if __name__ == "__main__":
    main()
