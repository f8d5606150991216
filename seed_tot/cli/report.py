"""`seed-tot report RUN [RUN...]`: each run's accuracy, answer rule by answer rule, then the
compute-matched comparison and its plot (the analysis lives in seed_tot/observe/comparison/)."""

from __future__ import annotations

from pathlib import Path

import click

from seed_tot.errors import SeedTotError
from seed_tot.observe.comparison.plot import draw
from seed_tot.observe.comparison.runs import report_run, run_wall_per_problem
from seed_tot.observe.comparison.text import comparison_report, problem_line, table

__all__ = ["report"]


@click.command()
@click.argument("runs", nargs=-1, required=True, type=click.Path(file_okay=False, path_type=Path))
@click.option("--plot", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Where to draw accuracy against tokens per problem (default: accuracy_vs_tokens.png in the first folder).")
@click.option("--no-plot", is_flag=True, help="Draw no plot.")
def report(runs: tuple[Path, ...], plot: Path | None, no_plot: bool) -> None:
    """Accuracy of finished runs (their --out folders) under each answer rule, from their stored files,
    then the compute-matched comparison: greedy CoT, self-consistency at K = 1..16 and each tree run, at
    their tokens per problem, paired by problem id. A folder may also be a pool of chains written by
    scripts/add_cot_samples.py --task."""
    from seed_tot_tasks import get_task

    for run in runs:
        if not (run / "results.jsonl").is_file():
            continue
        reports = report_run(run, get_task)
        if not reports:
            raise SeedTotError(f"{run}/results.jsonl holds no finished problem yet.")
        if len(runs) > 1:
            click.echo(f"## {run}\n")
        for item in reports:
            click.echo(problem_line(item))
        click.echo("")
        click.echo(table(reports, run_wall_per_problem(run)))
        click.echo("")
    text, points = comparison_report(list(runs), get_task)
    click.echo(text)
    if not no_plot:
        path = draw(points, plot if plot is not None else runs[0] / "accuracy_vs_tokens.png", runs)
        click.echo(f"\nplot: {path}")
