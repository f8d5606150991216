"""How much of a recorded search went to states it had already seen (tasks that name their states).

    python scripts/count_repeats.py DIR_OR_TRACE [...]

Replays each trace's tree in creation order and applies the rules of
seed_tot/search/known_states.py to every expansion (the children of one node, created together):
a thought that returns to a state on its path, or reaches one already in the tree, would have been
pruned. Prints, per trace directory, the expansions' new thoughts, how many would have been
pruned, the evaluator tokens spent rating them, and the trees that reached the goal.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import click

from seed_tot.observe.trace import load_trace, tree_from_trace
from seed_tot.records import stored_files
from seed_tot.search.known_states import mark_repeats
from seed_tot.tree import ReasoningTree
from seed_tot.task import Problem
from seed_tot_tasks import get_task


def replay(task, problem: Problem, recorded: ReasoningTree) -> dict[str, int]:
    counts = defaultdict(int)
    tree = ReasoningTree()
    for node in sorted(recorded.nodes(), key=lambda n: n.id):
        if node.parent is None:
            tree.insert(node)
            continue
        cot = node.info.get("cot") or node.info.get("cot_sample")
        info = {k: v for k, v in node.info.items() if k not in ("repeats",)}
        if "rejected" in info and info["rejected"].startswith(("returns to", "reaches the state")):
            del info["rejected"]  # a trace written with known_states: replay the rule itself
        copy = type(node)(**{**node.__dict__, "info": info})
        tree.insert(copy)
        if cot:
            continue
        counts["thoughts"] += 1
        mark_repeats(task, problem, tree, [copy])
        if "repeats" in copy.info:
            on_path = "on its path" in copy.info["rejected"]
            counts["loop" if on_path else "merge"] += 1
            counts["evaluator_tokens_on_repeats"] += node.evaluation.new_tokens if node.evaluation else 0
        counts["evaluator_tokens"] += node.evaluation.new_tokens if node.evaluation else 0
        if task.reaches_goal is not None and "rejected" not in node.info and task.reaches_goal(problem, node.state):
            counts["goal_nodes"] += 1
    return counts


@click.command(help=__doc__)
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path))
def main(paths: tuple[Path, ...]) -> None:
    print("| traces | problems | thoughts | loop (state on its path) | merge (state elsewhere in the tree) "
          "| evaluator tokens on them / all | trees that reached the goal |")
    print("|---|---|---|---|---|---|---|")
    for path in paths:
        files = stored_files(path, "*.json") if path.is_dir() else [path]
        total, solved, problems = defaultdict(int), 0, 0
        for file in files:
            trace = load_trace(file)
            task = get_task(trace.task)
            known = {p.id: p for p in task.load()}
            problem = known.get(trace.problem_id) or Problem(trace.problem_id, trace.question, trace.gold)
            counts = replay(task, problem, tree_from_trace(trace))
            problems += 1
            solved += counts["goal_nodes"] > 0
            for key, value in counts.items():
                total[key] += value
        print(f"| {path} | {problems} | {total['thoughts']} | {total['loop']} | {total['merge']} "
              f"| {total['evaluator_tokens_on_repeats']} / {total['evaluator_tokens']} | {solved} |")


if __name__ == "__main__":
    main()
