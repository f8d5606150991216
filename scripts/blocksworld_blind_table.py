"""The blind Blocksworld tree's outcomes over many seeds, as one small table that ships.

Reads the seeds' run folders that scripts/blocksworld_blind_seeds.sh writes (RUNS/step6-41-80/seedK
and RUNS/step8-1-40/seedK, every trace read as scripts/blocksworld_blind.py reads it: the search's
own plan, checked by the simulator) and writes one gzip JSON-lines file with a row per seed and
instance: the seed, the problem id, the optimal plan length and whether the tree solved it.
scripts/blocksworld_blind_expectation.py takes it with --blind-table, one blind run per seed, so
the expectation re-derives without the traces (a few MB each seed).

    python scripts/blocksworld_blind_table.py runs/blocksworld-blind-seeds --out results/blocksworld-blind/blind_seeds_3_19.jsonl.gz
"""

from __future__ import annotations

import gzip
import json
import re
import sys
from pathlib import Path

import click

ROOT = Path(__file__).resolve().parents[1]
for folder in (ROOT, ROOT / "scripts"):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))

from blocksworld_blind import outcomes  # noqa: E402

RANGES = ("step6-41-80", "step8-1-40")

Key = tuple[str, int]  # (problem id, optimal plan length)


def seed_rows(runs: Path) -> list[dict]:
    """One row per seed and instance, sorted by seed, then by the instance's key."""
    seeds = sorted({int(m.group(1)) for r in RANGES for path in (runs / r).glob("seed*")
                    if path.is_dir() and (m := re.fullmatch(r"seed(\d+)", path.name))})
    rows = []
    for seed in seeds:
        found = outcomes([runs / r / f"seed{seed}" for r in RANGES])
        rows += [{"seed": seed, "problem_id": pid, "optimal": o.optimal, "solved": o.solved}
                 for pid, o in sorted(found.items(), key=lambda item: (item[1].optimal, item[0]))]
    return rows


def write_table(rows: list[dict], path: Path) -> None:
    text = "".join(json.dumps(row) + "\n" for row in rows).encode()
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=9, mtime=0, filename="") as out:
        out.write(text)  # no name or time in the header: the same rows give the same bytes


def table_runs(path: Path) -> list[dict[Key, bool]]:
    """The table's blind runs, one per seed in seed order: instance key -> solved."""
    runs: dict[int, dict[Key, bool]] = {}
    with gzip.open(path, "rt") as rows:
        for line in rows:
            row = json.loads(line)
            runs.setdefault(row["seed"], {})[(row["problem_id"], row["optimal"])] = row["solved"]
    return [runs[seed] for seed in sorted(runs)]


@click.command()
@click.argument("runs", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), required=True)
def main(runs: Path, out: Path) -> None:
    rows = seed_rows(runs)
    write_table(rows, out)
    seeds = sorted({row["seed"] for row in rows})
    click.echo(f"{len(rows)} rows, seeds {seeds[0]}-{seeds[-1]} ({len(seeds)}), into {out}")


if __name__ == "__main__":
    main()
