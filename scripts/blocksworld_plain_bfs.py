"""Blocksworld without a model: the simulator's plain breadth-first search over legal actions.

The baseline any simulator-backed planner has to beat. For each instance of the given ranges of a
bundled data file, `seed_tot_tasks.pddl.breadth_first_search` expands positions in order of plan
length over the actions the task's PDDL simulator lists as legal (`applicable_actions`, the same
simulator the tree's moves and checks use), entering each position once, so the first plan that
reaches the goal is a shortest one. A node cap (`--max-expanded`) bounds the work per instance.
Each plan found is re-checked with the task's own plan check (`BlocksworldTask.check`) and its
length set against the gold plan's (the instance's optimum). Seconds are wall time of the search
alone, per instance, on one core.

With `--compare`, the instances are also paired with the stored model-guided MCTS and the blind
MCTS's expectation over 20 seeds (results/blocksworld-blind/blind_expectation_20_seeds.json holds
both, per instance, for 6-step instances 41-80 and 8-step instances 1-40).

    python scripts/blocksworld_plain_bfs.py \
        --range tasks/data/blocksworld/planbench_step6.jsonl 41 80 \
        --range tasks/data/blocksworld/planbench_step8.jsonl 1 40 \
        --compare results/blocksworld-blind/blind_expectation_20_seeds.json \
        --out results/blocksworld-plain-bfs/plain_bfs.json
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import click

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # `python scripts/blocksworld_plain_bfs.py` from anywhere
    sys.path.insert(0, str(ROOT))

from seed_tot.observe.paired_stats import paired_bootstrap  # noqa: E402
from seed_tot_tasks.blocksworld import BlocksworldTask, planning_problem  # noqa: E402
from seed_tot_tasks.pddl import breadth_first_search  # noqa: E402

TASK = BlocksworldTask()
MAX_EXPANDED = 100_000
DEPTH_LIMIT = 20


def relative(path: Path) -> str:
    """A path as the command names it, relative to the repository where it lies inside it."""
    try:
        return str(path.resolve().relative_to(ROOT))
    except ValueError:
        return str(path)


def solve(problem, max_expanded: int = MAX_EXPANDED, limit: int = DEPTH_LIMIT) -> dict:
    """One instance: the plan breadth-first search finds, checked by the task's simulator."""
    instance = planning_problem(problem.meta["instance_pddl"])
    began = time.perf_counter()
    found = breadth_first_search(TASK.domain, instance.objects, instance.init, instance.goal,
                                 limit=limit, max_expanded=max_expanded)
    seconds = time.perf_counter() - began
    plan = found.plan
    check = TASK.check(problem, plan) if plan is not None else None
    optimum = int(problem.meta.get("n_steps") or len(problem.gold))
    return {
        "problem_id": problem.id,
        "optimal": optimum,
        "solved": bool(check is not None and check.valid),
        "plan": [action.pddl() for action in plan] if plan is not None else None,
        "plan_length": len(plan) if plan is not None else None,
        "capped": found.capped,
        "expanded": found.expanded,
        "generated": found.generated,
        "seconds": round(seconds, 4),
    }


def summary(rows: list[dict]) -> dict:
    solved = [r for r in rows if r["solved"]]
    return {
        "instances": len(rows),
        "solved": len(solved),
        "capped": sum(r["capped"] for r in rows),
        "mean_length_over_optimal": round(sum(r["plan_length"] / r["optimal"] for r in solved) / len(solved), 4)
        if solved else None,
        "optimal_plans": sum(r["plan_length"] == r["optimal"] for r in solved),
        "shorter_than_gold": sum(r["plan_length"] < r["optimal"] for r in solved),
        "expanded_mean": round(sum(r["expanded"] for r in rows) / len(rows), 1),
        "expanded_max": max(r["expanded"] for r in rows),
        "seconds_mean": round(sum(r["seconds"] for r in rows) / len(rows), 4),
        "seconds_max": round(max(r["seconds"] for r in rows), 4),
        "seconds_total": round(sum(r["seconds"] for r in rows), 3),
    }


def compare(rows: list[dict], path: Path) -> dict:
    """The instances the stored expectation holds: BFS against the model-guided MCTS and the blind MCTS."""
    stored = {r["problem_id"]: r for r in json.loads(path.read_text())["per_instance"]}
    shared = [r for r in rows if r["problem_id"] in stored]
    if not shared:
        return {"instances": 0}
    bfs = [float(r["solved"]) for r in shared]
    model = [float(stored[r["problem_id"]]["model_solved"]) for r in shared]
    blind = [stored[r["problem_id"]]["blind_rate"] for r in shared]
    result = {"instances": len(shared), "bfs_solved": int(sum(bfs)), "model_guided_solved": int(sum(model)),
              "blind_expected": round(sum(blind), 2)}
    for name, other in (("model_guided", model), ("blind", blind)):
        differences = [a - b for a, b in zip(bfs, other, strict=True)]
        low, high = paired_bootstrap(differences)
        result[f"bfs_minus_{name}"] = round(sum(differences) / len(differences), 4)
        result[f"bfs_minus_{name}_ci95"] = [round(low, 4), round(high, 4)]
    return result


def run_ranges(ranges: tuple[tuple[str, int, int], ...], max_expanded: int, limit: int) -> list[dict]:
    found = []
    for data, first, last in ranges:
        problems = TASK.load(data)[first - 1:last]
        rows = [solve(problem, max_expanded, limit) for problem in problems]
        found.append({"data": relative(Path(data)), "first": first, "last": last, "summary": summary(rows),
                      "instances": rows})
    return found


@click.command()
@click.option("--range", "ranges", type=(str, int, int), multiple=True, required=True,
              help="DATA FIRST LAST: a bundled data file and its instances FIRST..LAST (1-based, inclusive).")
@click.option("--max-expanded", type=int, default=MAX_EXPANDED, show_default=True,
              help="Stop an instance's search unsolved after expanding this many positions.")
@click.option("--limit", type=int, default=DEPTH_LIMIT, show_default=True, help="Longest plan searched, in actions.")
@click.option("--compare", "compare_path", type=click.Path(exists=True, dir_okay=False), default=None,
              help="A blind_expectation JSON (scripts/blocksworld_blind_expectation.py): pair its instances.")
@click.option("--out", type=click.Path(dir_okay=False), default=None, help="Write the JSON here.")
def main(ranges, max_expanded, limit, compare_path, out) -> None:
    results = run_ranges(ranges, max_expanded, limit)
    report = {
        "command": "python scripts/blocksworld_plain_bfs.py " + " ".join(relative(Path(a)) if Path(a).exists() else a
                                                                         for a in sys.argv[1:]),
        "max_expanded": max_expanded,
        "limit": limit,
        "ranges": results,
    }
    if compare_path:
        for r in results:
            r["compare"] = compare(r["instances"], Path(compare_path))
        report["compare"] = compare([row for r in results for row in r["instances"]], Path(compare_path))
    click.echo("| data | instances | solved | plan length / optimal | nodes expanded, mean / max | seconds, mean / max |")
    click.echo("|---|---|---|---|---|---|")
    for r in results:
        s = r["summary"]
        click.echo(f"| {r['data']} {r['first']}-{r['last']} | {s['instances']} | {s['solved']}/{s['instances']} "
                   f"| {s['mean_length_over_optimal']} | {s['expanded_mean']:,.1f} / {s['expanded_max']:,} "
                   f"| {s['seconds_mean']:.4f} / {s['seconds_max']:.4f} |")
    if compare_path:
        for r in results:
            click.echo(f"{r['data']} {r['first']}-{r['last']}: {json.dumps(r['compare'])}")
        click.echo(f"all ranges: {json.dumps(report['compare'])}")
    if out:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        Path(out).write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
