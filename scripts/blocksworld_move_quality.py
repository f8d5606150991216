"""How well a Blocksworld tree's judges tell optimal moves from the rest, from recorded traces.

A move (a tree node below the root, not a chain of thought) is *optimal* when the simulator's
shortest plan from the position it reaches is one step shorter than from its parent's position.
Among the legal moves the evaluator rated, the script reports the AUROC of the evaluator's value
and (thought mode "choose") of the move's probability at telling optimal moves from the others,
and, over expansions with two or more rated legal children, how often the child each signal
ranks first is optimal, against the share of optimal children (a judge that picks at random).

    python scripts/blocksworld_move_quality.py results/blocksworld-21-40/choose results/blocksworld-21-40/sample
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

import click

from seed_tot.observe.paired_stats import auroc
from seed_tot.observe.trace import load_trace
from seed_tot_tasks.blocksworld import BlocksworldTask, planning_problem, plan_lines, read_plan
from seed_tot_tasks.pddl import shortest_plan

TASK = BlocksworldTask()


@lru_cache(maxsize=None)
def distance(instance_pddl: str, state) -> int | None:
    problem = planning_problem(instance_pddl)
    plan = shortest_plan(TASK.domain, problem.objects, state, problem.goal, limit=16)
    return None if plan is None else len(plan)


def position(problem, state_text: str):
    """The simulated position a plan reaches, or None when the plan is unreadable or illegal."""
    actions = read_plan(plan_lines(state_text))
    if actions is None:
        return None
    result = TASK.check(problem, actions)
    return result.final_state if result.executable else None


def rated_moves(trace, problem) -> list[dict]:
    """Every legal move the evaluator rated: its parent, optimality, value and move probability."""
    nodes = {node.id: node for node in trace.nodes}
    moves = []
    for node in trace.nodes:
        if node.parent is None or node.info.get("cot") or node.info.get("cot_sample") or "rejected" in node.info:
            continue
        here, before = position(problem, node.state), position(problem, nodes[node.parent].state)
        if here is None or before is None:
            continue
        pddl = problem.meta["instance_pddl"]
        far, near = distance(pddl, before), distance(pddl, here)
        moves.append({"parent": node.parent, "optimal": far is not None and near == far - 1,
                      "value": node.value, "probability": node.info.get("move_probability"),
                      "verb": node.thought.split()[0] if node.thought.split() else ""})
    return moves


def top_choice_rate(moves: list[dict], signal: str) -> tuple[float, float, int] | None:
    """(share of expansions whose top child by `signal` is optimal, mean share of optimal children, expansions)."""
    by_parent: dict[int, list[dict]] = {}
    for move in moves:
        if move[signal] is not None:
            by_parent.setdefault(move["parent"], []).append(move)
    groups = [group for group in by_parent.values() if len(group) > 1]
    if not groups:
        return None
    top = sum(max(group, key=lambda m: m[signal])["optimal"] for group in groups) / len(groups)
    chance = sum(sum(m["optimal"] for m in group) / len(group) for group in groups) / len(groups)
    return top, chance, len(groups)


def folder_moves(folder: Path, problems: dict) -> list[dict]:
    moves = []
    for line in (folder / "results.jsonl").read_text().splitlines():
        record = json.loads(line)
        if "trace_path" not in record:
            continue
        trace = load_trace(record["trace_path"])
        moves.extend(rated_moves(trace, problems[trace.problem_id]))
    return moves


def folder_report(folder: Path, moves: list[dict]) -> list[str]:
    rows = []
    for signal in ("value", "probability"):
        scored = [m for m in moves if m[signal] is not None]
        if not scored:
            continue
        area = auroc([m[signal] for m in scored], [m["optimal"] for m in scored])
        top = top_choice_rate(moves, signal)
        top_text = "-" if top is None else f"{top[0]:.2f} against {top[1]:.2f} at random ({top[2]} expansions)"
        rows.append(f"| {folder} | {signal} | {len(scored)} | {sum(m['optimal'] for m in scored)} | "
                    f"{'-' if area is None else f'{area:.3f}'} | {top_text} |")
    return rows


@click.command(help=__doc__.split("\n\n")[0] + " FOLDERS: run folders of seed-tot blocksworld (results.jsonl).")
@click.argument("folders", nargs=-1, required=True, type=click.Path(path_type=Path))
def main(folders: tuple[Path, ...]) -> None:
    problems = {problem.id: problem for problem in TASK.load()}
    moves = {folder: folder_moves(folder, problems) for folder in folders}
    print("| run | signal | rated legal moves | optimal | AUROC | top-ranked child optimal |")
    print("|---|---|---|---|---|---|")
    for folder in folders:
        for row in folder_report(folder, moves[folder]):
            print(row)
    print("\nMean evaluator value by the move's first word, all runs above together:\n")
    print("| move | optimal: moves, mean value | not optimal: moves, mean value |")
    print("|---|---|---|")
    every = [move for folder_moves_ in moves.values() for move in folder_moves_]
    for verb in sorted({move["verb"] for move in every}):
        cells = []
        for optimal in (True, False):
            values = [m["value"] for m in every if m["verb"] == verb and m["optimal"] == optimal and m["value"] is not None]
            cells.append(f"{len(values)}, {sum(values) / len(values):.3f}" if values else "0, -")
        print(f"| {verb} | {cells[0]} | {cells[1]} |")


if __name__ == "__main__":
    main()
