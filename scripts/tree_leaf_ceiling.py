"""Is a tree limited by its judge or by its thoughts? For each run folder: how many problems have a
right answer leaf anywhere in the tree (what a perfect final choice could reach), the share of the
tree's answer leaves that are right, and the same share for the run's chains of thought (greedy and
sampled, grown beside the tree from the task's chain-of-thought prompt).

  python scripts/tree_leaf_ceiling.py results/heldout-gsm8k-43-100/tree-bfs-logits-path \
      results/heldout-gsm8k-43-100/tree-bfs-learned-value

A leaf's answer is the one the task reads from it (the answers `seed-tot trace show` prints); an
answer is right when the task scores it 1 against the problem's gold answer.
"""

from __future__ import annotations

from pathlib import Path

import click

from seed_tot.observe.trace import load_trace
from seed_tot.observe.trace_view import node_answers
from seed_tot.records import stored_files
from seed_tot.task import Problem
from seed_tot_tasks import bundled_task


def leaf_counts(trace) -> dict[str, int]:
    """Right and all answers of the tree's leaves and of the chains of thought, for one trace."""
    task = bundled_task(trace.task)
    problem = Problem(id=trace.problem_id, question="", gold=trace.gold)
    answers = node_answers(trace, bundled_task)
    counts = {"tree_right": 0, "tree_answers": 0, "chain_right": 0, "chain_answers": 0}
    for node in trace.nodes:
        answer = answers.get(node.id)
        if answer is None:
            continue
        kind = "chain" if node.info.get("cot") or node.info.get("cot_sample") else "tree"
        counts[f"{kind}_answers"] += 1
        counts[f"{kind}_right"] += task.score(problem, answer) == 1.0
    return counts


@click.command(help=__doc__)
@click.argument("runs", nargs=-1, required=True, type=click.Path(exists=True, file_okay=False, path_type=Path))
def main(runs: tuple[Path, ...]) -> None:
    click.echo("| run | problems | a right tree leaf somewhere | tree answer leaves right | chain answers right |")
    click.echo("|---|---|---|---|---|")
    for run in runs:
        per_problem = [leaf_counts(load_trace(path)) for path in stored_files(run / "traces", "*.json")]
        reached = sum(c["tree_right"] > 0 for c in per_problem)
        total = {key: sum(c[key] for c in per_problem) for key in per_problem[0]} if per_problem else {}
        click.echo(f"| {run.name} | {len(per_problem)} | {reached}/{len(per_problem)} | "
                   f"{total.get('tree_right', 0)}/{total.get('tree_answers', 0)} | "
                   f"{total.get('chain_right', 0)}/{total.get('chain_answers', 0)} |")


if __name__ == "__main__":
    main()
