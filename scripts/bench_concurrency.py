"""Throughput of a task run across --concurrency and --batching, side by side.

Runs `seed-tot TASK --limit N --concurrency C --batching B` once per configuration, one after
another on the same problems (each in its own process and --out folder under OUT), then reads
each run's OUT/.../runs.jsonl (wall time, tokens/s over the run, peak RSS) and its traces, and
checks that every configuration built the same trees as the first (same thoughts, same answer).

  python scripts/bench_concurrency.py --task gsm8k --limit 4 --configs 1:rounds,4:rounds,4:continuous \\
      --out results/bench_concurrency_rounds_vs_continuous -- --depth 2

A configuration is CONCURRENCY:BATCHING, optionally :DTYPE (e.g. 8:continuous:bfloat16) to
compare dtypes side by side, and then :plain to run with packed linear layers turned off
(SEED_TOT_PACK_WEIGHTS=0; e.g. 1:continuous:bfloat16:plain against 1:continuous:bfloat16).
Arguments after `--` go to every run unchanged.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import click

from seed_tot.records import read_stored_text, stored_files, write_text_atomically
from seed_tot.machine_facts import machine_facts


DTYPES = ("auto", "float32", "bfloat16", "float16")


def parse_configs(text: str) -> list[tuple[int, str, str, bool]]:
    """"1:rounds,4:continuous:bfloat16:plain" -> [(1, "rounds", "auto", True), (4, "continuous", "bfloat16", False)];
    the last field says whether linear layers may be packed."""
    configs = []
    for item in text.split(","):
        fields = item.strip().split(":")
        if 2 <= len(fields) < 4:
            fields += ["auto", "packed"][len(fields) - 2:]  # the defaults of the fields left out
        concurrency, batching, dtype, packing = fields if len(fields) == 4 else ("", "", "", "")
        if (batching not in ("rounds", "continuous") or not concurrency.isdigit() or dtype not in DTYPES
                or packing not in ("packed", "plain")):
            raise click.ClickException(f"Bad configuration {item!r}: write CONCURRENCY:BATCHING[:DTYPE[:plain]], e.g. 4:continuous or "
                     f"8:continuous:bfloat16:plain (dtypes: {', '.join(DTYPES)}).")
        configs.append((int(concurrency), batching, dtype, packing == "packed"))
    return configs


def trees(run_dir: Path) -> dict[str, tuple]:
    """Per problem: the thoughts of every node in creation order and the final answer."""
    out = {}
    for path in stored_files(run_dir / "traces", "*.json"):  # FILE.json or FILE.json.gz
        trace = json.loads(read_stored_text(path))
        out[trace["problem_id"]] = (tuple(node["thought"] for node in trace["nodes"]), trace["final_answer"])
    return out


def print_work(rows: list[dict]) -> None:
    """Where each run's time went: prefill when requests joined, and decode steps (executors with
    sessions); a slot is one token position a target forward computed, pads included."""
    print("| concurrency | batching | dtype | prefill s | prefill slots (pads) | decode s | steps | rows per step | "
          "decode slots (pads) | ms per decode slot |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        work = row.get("session_work")
        if work and work["steps"]:
            join, step = work["join"], work["step"]
            print(f"| {row['concurrency']} | {row['batching']} | {row.get('dtype', 'auto')} | {join['seconds']} | {join['slots']} ({join['pad_slots']}) | "
                  f"{step['seconds']} | {work['steps']} | {work['step_rows'] / work['steps']:.1f} | "
                  f"{step['slots']} ({step['pad_slots']}) | {1000 * step['seconds'] / max(step['slots'], 1):.1f} |")


@click.command(help=__doc__)
@click.option("--task", default="gsm8k", show_default=True)
@click.option("--limit", default=4, show_default=True)
@click.option("--configs", default="1:rounds,4:rounds,4:continuous", show_default=True)
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), required=True,
              help="a new folder; each run writes into a subfolder")
@click.argument("run_args", nargs=-1, type=click.UNPROCESSED)
def main(task: str, limit: int, configs: str, out: Path, run_args: tuple[str, ...]) -> None:
    if out.exists() and any(out.iterdir()):
        raise click.ClickException(f"{out} is not empty: pass a new --out folder.")
    rows, built = [], []
    for concurrency, batching, dtype, packing in parse_configs(configs):
        run_dir = out / (f"c{concurrency}-{batching}" + ("" if dtype == "auto" else f"-{dtype}")
                              + ("" if packing else "-plain"))
        command = ["seed-tot", task, "--limit", str(limit), "--concurrency", str(concurrency),
                   "--batching", batching, "--out", str(run_dir), *run_args]
        if dtype != "auto":
            command += ["--dtype", dtype]
        print(" ".join(command), flush=True)
        subprocess.run(command, check=True, env={**os.environ, "SEED_TOT_PACK_WEIGHTS": "1" if packing else "0"})
        totals = json.loads((run_dir / "runs.jsonl").read_text().splitlines()[-1])
        rows.append({"concurrency": concurrency, "batching": batching, "dtype": dtype, **totals})
        built.append(trees(run_dir))
    for row, tree in zip(rows, built):
        row["speedup_vs_first"] = round(rows[0]["wall_seconds"] / row["wall_seconds"], 2)
        row["same_trees_as_first"] = tree == built[0]
    print("| concurrency | batching | dtype | packed layers | wall s | new tokens | tokens/s | speed-up vs first | "
          "peak RSS MiB | same trees |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        print(f"| {row['concurrency']} | {row['batching']} | {row['dtype']} | {row.get('packed_linear_layers', 0)} | "
              f"{row['wall_seconds']} | {row['new_tokens']} | {row['tokens_per_second']} | {row['speedup_vs_first']}x | "
              f"{row['peak_rss_mib']} | {row['same_trees_as_first']} |")
    print_work(rows)
    summary = {"command": " ".join(sys.argv), "machine": machine_facts(),
               "runs": rows}
    write_text_atomically(out / "summary.json", json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
