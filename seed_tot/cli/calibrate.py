"""`seed-tot calibrate`: time every path that can run a target on this machine and cache the fastest,
which `--method auto` (the default) follows."""

from __future__ import annotations

import json

import click


@click.command()
@click.option("--target", default="default-target", show_default=True, help="The target model (alias, local directory, .gguf or hub id).")
@click.option("--width", type=int, default=None, help="Rows decoded at once to time (rounded up to 4, 8 or 16; default: 16 and 8, the CLI's many-problem and one-problem widths).")
@click.option("--int8", "allow_int8", is_flag=True, help="Also time in-process int8 linear layers (lossy: greedy choices differ at about 1% of positions), kept in a record of its own; a run uses int8 only when given --int8.")
@click.option("--json", "as_json", is_flag=True, help="Print the records as JSON.")
def calibrate(target: str, width: int | None, allow_int8: bool, as_json: bool) -> None:
    """Time each path for TARGET (in process in float32 and bfloat16, llama.cpp for a GGUF target) and cache the fastest."""
    from seed_tot.calibration.choice import calibrate as run_calibration, calibration_file

    widths = [width] if width else [16, 8]
    for rows in widths:
        record = run_calibration(target, rows, allow_int8=allow_int8, echo=click.echo)
        click.echo(json.dumps(record.model_dump(mode="json"), indent=1) if as_json else record.line())
        click.echo(f"cached: {calibration_file(target, record.width, allow_int8)}")
