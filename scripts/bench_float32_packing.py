"""The in-process path in float32 with its linear layers packed once at load against plain F.linear,
side by side in one command: each arm in its own child process (packing is decided at load, and
SEED_TOT_PACK_WEIGHTS=0 turns it off), alternating, at the widths given, with the probe that
`seed-tot calibrate` uses (the batched-lookup executor, sampled requests of one prompt).

    python scripts/bench_float32_packing.py --widths 8,16 --repeats 2 --out results/engines/float32-packing/bench.json
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import click

CHILD = """
import json, sys
from seed_tot.calibration.probe import RunPath, time_in_process
from seed_tot.runtime.packed_linear import float32_packing_pays
timing = time_in_process(sys.argv[1], RunPath("batched-lookup", "float32"), int(sys.argv[2]))
print(json.dumps({"tokens": timing.tokens, "seconds": timing.seconds, "load_seconds": timing.load_seconds,
                  "tokens_per_second": timing.tokens_per_second, "probe_says_pack": float32_packing_pays()}))
"""


def run_arm(target: str, width: int, packed: bool) -> dict:
    env = dict(os.environ, SEED_TOT_PACK_WEIGHTS="1" if packed else "0")
    done = subprocess.run([sys.executable, "-c", CHILD, target, str(width)], env=env, capture_output=True,
                          text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


@click.command()
@click.option("--target", default="default-target", show_default=True)
@click.option("--widths", default="8,16", show_default=True, help="Comma-separated rows decoded at once.")
@click.option("--repeats", type=int, default=2, show_default=True, help="Alternations of the two arms per width.")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), required=True)
def main(target: str, widths: str, repeats: int, out: Path) -> None:
    from seed_tot.calibration.machine import machine_identity, read_bandwidth_gb_s
    from seed_tot.machine_facts import load_average

    rows = []
    for width in [int(w) for w in widths.split(",")]:
        for repeat in range(repeats):
            for packed in (False, True):
                measured = run_arm(target, width, packed)
                rows.append({"width": width, "repeat": repeat, "packed": packed, **measured})
                click.echo(f"width {width:3d} {'packed' if packed else 'plain '}: "
                           f"{measured['tokens_per_second']:.2f} tokens/s ({measured['seconds']:.1f} s)")
    summary = []
    for width in sorted({r["width"] for r in rows}):
        best = {p: max(r["tokens_per_second"] for r in rows if r["width"] == width and r["packed"] == p) for p in (False, True)}
        summary.append({"width": width, "plain_tokens_per_s": round(best[False], 2),
                        "packed_tokens_per_s": round(best[True], 2), "speedup": round(best[True] / best[False], 2)})
        click.echo(f"width {width}: packed / plain = {best[True] / best[False]:.2f}x (best of {repeats})")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"command": "python scripts/bench_float32_packing.py " + " ".join(sys.argv[1:]),
                               "machine": machine_identity(), "bandwidth_gb_s": read_bandwidth_gb_s(),
                               "load_average": load_average(), "target": target, "rows": rows,
                               "summary": summary}, indent=1) + "\n")


if __name__ == "__main__":
    main()
