"""`seed-tot trace show|plot|view`: read a trace (or a whole run) back as text, pictures or a web page."""

from __future__ import annotations

from pathlib import Path

import click

from seed_tot.errors import SeedTotError
from seed_tot.observe.trace import load_trace
from seed_tot.records import GZIP_SUFFIX
from seed_tot_tasks import bundled_task  # a trace's task, to read its answers back (None: a custom task)


@click.group()
def trace() -> None:
    """Inspect a trace JSON file written by a task run (FILE.json, or FILE.json.gz as results/ stores them)."""


@trace.command("show")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--width", default=90, show_default=True, help="Characters of each thought to show.")
def show(file: str, width: int) -> None:
    """Print the tree (depth, values, chosen path marked '*') and the run statistics."""
    from seed_tot.observe.trace_view import render_text

    click.echo(render_text(load_trace(file), width=width))


@trace.command("plot")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--out", "out_dir", type=click.Path(file_okay=False), default=None, help="Directory for the PNGs (default: beside FILE).")
def plot(file: str, out_dir: str | None) -> None:
    """Render the tree as a PNG, and the scheduler Gantt chart and target utilization when recorded."""
    from seed_tot.observe.html_view import scheduler_events
    from seed_tot.observe.plots import plot_schedule, plot_target_utilization
    from seed_tot.observe.trace_view import plot_tree

    loaded = load_trace(file)
    base = Path(out_dir) if out_dir else Path(file).parent
    stem = Path(Path(file).name.removesuffix(GZIP_SUFFIX)).stem  # FILE.json or FILE.json.gz: FILE
    written = [plot_tree(loaded, base / f"{stem}.tree.png", bundled_task)]
    events = scheduler_events(loaded)
    if events:
        written.append(plot_schedule(events, base / f"{stem}.schedule.png"))
        written.append(plot_target_utilization(events, base / f"{stem}.utilization.png"))
    else:
        click.echo("no scheduler events in this trace (run with --method seed to record them)")
    for path in written:
        click.echo(f"wrote {path}")


@trace.command("view")
@click.argument("source", type=click.Path())
@click.option("--out", "-o", "out", type=click.Path(dir_okay=False), default=None, help="HTML file to write (default: FILE.html beside the trace, or RUN_DIR/index.html).")
def view(source: str, out: str | None) -> None:
    """Write one self-contained HTML page (works offline) that draws a trace's tree, or, given a
    run directory, lists its problems and links each to its tree."""
    from seed_tot.observe.html_view import write_view

    if not source.strip():  # click reads "" as the current folder
        raise SeedTotError("The path is empty: pass a trace file or a run directory.")
    click.echo(f"wrote {write_view(source, out, bundled_task)}")
