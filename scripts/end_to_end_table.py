"""The table of an end-to-end comparison (scripts/engines_end_to_end.sh): one row per method
folder, from what the run stored: the run's own record (runs.jsonl: wall time, new tokens,
tokens/s over the run, dtype, concurrency), its results (results.jsonl: answers scored by the
gold in each problem's trace), `/usr/bin/time -v` (peak RSS of the largest process: for
llama-cpp that is the server child) and the load average before and after.

    python scripts/end_to_end_table.py results/engines/gsm8k_31_34/*
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import click


def last_json_line(path: Path) -> dict:
    lines = [line for line in path.read_text().splitlines() if line.strip()]
    return json.loads(lines[-1])


def peak_rss_gib(time_v: Path) -> float | None:
    match = re.search(r"Maximum resident set size \(kbytes\): (\d+)", time_v.read_text()) if time_v.exists() else None
    return int(match.group(1)) / 2**20 if match else None


def load_average(uptime: Path) -> str:
    match = re.search(r"load average: ([\d.]+)", uptime.read_text()) if uptime.exists() else None
    return match.group(1) if match else "?"


def row(folder: Path) -> str:
    run = last_json_line(folder / "runs.jsonl")
    results = [json.loads(line) for line in (folder / "results.jsonl").read_text().splitlines() if line.strip()]
    correct = sum(1 for r in results if r.get("correct"))
    rss = peak_rss_gib(folder / "time_v.txt")
    rss_text = f"{rss:.1f}" if rss is not None else "?"
    load = f"{load_average(folder / 'uptime_before.txt')} / {load_average(folder / 'uptime_after.txt')}"
    return (
        f"| {folder.name} | {run['dtype']} | {run['concurrency']} | {len(results)} | {correct}/{len(results)} "
        f"| {run['wall_seconds']:.0f} | {run['new_tokens']:,} | {run['tokens_per_second']:.2f} | {rss_text} | {load} |"
    )


@click.command()
@click.argument("folders", nargs=-1, required=True, type=click.Path(exists=True, file_okay=False, path_type=Path))
def main(folders: tuple[Path, ...]) -> None:
    """Print the markdown table of FOLDERS (one method's run each)."""
    print("| method | dtype | problems at once | problems | correct | wall s | new tokens | tokens/s over the run | peak RSS GiB | load before / after |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for folder in folders:
        if (folder / "runs.jsonl").exists():
            print(row(folder))


if __name__ == "__main__":
    main()
