"""Blocksworld runs side by side: how many instances the search solved by itself, how many final
answers are right, and how long the search's plans are against the gold (optimal) plans.

Written for the blind baseline (thought mode "random", value mode "constant": no model call) against
the model-guided MCTS, from the traces each run stored. A plan's length is the number of actions of
the search's own answer on the instances it solved; the optimum is the instance's `n_steps` (the
length of its gold plan). A column joined with "+" pools run folders (e.g. two instance ranges);
every row after the first is paired with the first on the instances both hold (search's own choice,
95% paired bootstrap).

    python scripts/blocksworld_blind.py results/blocksworld-41-60/mcts-choose results/blocksworld-41-60/mcts-blind
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import click

from seed_tot.observe.comparison.runs import search_choice
from seed_tot.observe.paired_stats import paired_bootstrap
from seed_tot.observe.trace import load_trace
from seed_tot.records import stored_files
from seed_tot.task import Problem
from seed_tot_tasks.blocksworld import BlocksworldTask, plan_lines

TASK = BlocksworldTask()


@dataclass
class Outcome:
    solved: bool  # the search's own answer reaches the goal
    final: bool  # the run's final answer (after any vote) reaches the goal
    length: int  # actions in the search's own answer
    optimal: int  # actions in the gold plan


def outcomes(folders: list[Path]) -> dict[str, Outcome]:
    """Per problem id, from every trace under FOLDER/traces/ of the pooled folders."""
    found = {}
    for folder in folders:
        for path in stored_files(folder / "traces", "*.json"):  # FILE.json or FILE.json.gz
            trace = load_trace(path)
            meta = trace.problem_meta or {}
            problem = Problem(id=trace.problem_id, question=trace.question, gold=trace.gold, meta=meta)
            _, answer = search_choice(TASK, problem, trace)
            found[trace.problem_id] = Outcome(
                solved=TASK.score(problem, answer) == 1.0,
                final=TASK.score(problem, trace.final_answer) == 1.0,
                length=len(plan_lines(answer or "")),
                optimal=int(meta.get("n_steps") or len(trace.gold)),
            )
    return found


def row(name: str, runs: dict[str, Outcome], first: dict[str, Outcome] | None) -> str:
    solved = [o for o in runs.values() if o.solved]
    ratio = sum(o.length / o.optimal for o in solved) / len(solved) if solved else float("nan")
    share = sum(o.length == o.optimal for o in solved) / len(solved) if solved else float("nan")
    length = sum(o.length for o in solved) / len(solved) if solved else float("nan")
    paired = ""
    ids = sorted(set(runs) & set(first)) if first is not None else []
    if first is not None and not ids:
        paired = "no shared instances"
    elif first is not None:
        differences = [float(runs[i].solved) - float(first[i].solved) for i in ids]
        low, high = paired_bootstrap(differences)
        paired = (f"{100 * sum(differences) / len(ids):+.1f} [{100 * low:+.1f}, {100 * high:+.1f}] "
                  f"on {len(ids)}")
    return (f"| {name} | {len(runs)} | {len(solved)}/{len(runs)} | {sum(o.final for o in runs.values())}/{len(runs)} "
            f"| {length:.2f} | {ratio:.3f} | {share:.0%} | {paired} |")


@click.command()
@click.argument("runs", nargs=-1, required=True)
def main(runs: tuple[str, ...]) -> None:
    """RUNS: run folders (--out of `seed-tot blocksworld`); A+B pools folders into one row."""
    click.echo("| run | instances | solved by the search itself | final answer correct | mean plan length (solved) "
               "| mean length / optimal (solved) | optimal plans (solved) | solved vs first row, points, 95% paired "
               "bootstrap, instances |")
    click.echo("|---|---|---|---|---|---|---|---|")
    first = None
    for name in runs:
        found = outcomes([Path(part) for part in name.split("+")])
        click.echo(row(name, found, first))
        first = found if first is None else first


if __name__ == "__main__":
    main()
