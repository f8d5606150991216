"""The model-guided Blocksworld tree against the blind tree's expectation over many seeds.

The blind tree (random legal moves, constant values: no model call) costs seconds, so instead of
pairing the model-guided run with one blind seed, each instance's blind solve rate is read off
every blind run that holds it (the share of seeds whose tree solved it). MODEL is the model-guided
run ("+" pools folders, e.g. two instance ranges); each --blind is one seed's run, pooled the same
way, or --blind-table gives many seeds at once (scripts/blocksworld_blind_table.py). Instances are told apart by id and optimal plan length (two data files may reuse an id).
Prints, per optimal plan length and pooled, the model's solved count, the blind expectation and
their paired difference (95% paired bootstrap over instances), and writes OUT.md / OUT.json with
every instance's outcomes.

    python scripts/blocksworld_blind_expectation.py results/blocksworld-41-60/mcts-choose+results/blocksworld-61-80/mcts-choose \\
        --blind results/blocksworld-41-60/mcts-blind+results/blocksworld-61-80/mcts-blind ... --out OUT
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

ROOT = Path(__file__).resolve().parents[1]
for folder in (ROOT, ROOT / "scripts"):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))

from blocksworld_blind import outcomes  # noqa: E402
from blocksworld_blind_table import table_runs  # noqa: E402

from seed_tot.observe.paired_stats import paired_bootstrap  # noqa: E402
from seed_tot.analysis.report_files import write_report  # noqa: E402

Key = tuple[str, int]  # (problem id, optimal plan length)


def solved_by_key(pool: str) -> dict[Key, bool]:
    return {(pid, o.optimal): o.solved for pid, o in outcomes([Path(part) for part in pool.split("+")]).items()}


def blind_rates(runs: list[dict[Key, bool]], keys: list[Key]) -> dict[Key, tuple[float, int]]:
    """Per instance: (share of the blind runs holding it that solved it, how many held it)."""
    found = {}
    for key in keys:
        held = [run[key] for run in runs if key in run]
        if held:
            found[key] = (sum(held) / len(held), len(held))
    return found


def comparison(name: str, model: dict[Key, bool], rates: dict[Key, tuple[float, int]], resamples: int) -> dict:
    keys = sorted(set(model) & set(rates))
    differences = [float(model[k]) - rates[k][0] for k in keys]
    low, high = paired_bootstrap(differences, resamples=resamples)
    return {"instances": name, "n": len(keys), "model_solved": sum(model[k] for k in keys),
            "blind_expected": round(sum(rates[k][0] for k in keys), 2),
            "blind_runs_per_instance": sorted({rates[k][1] for k in keys}),
            "model_minus_blind": round(sum(differences) / len(keys), 4), "ci95": [round(low, 4), round(high, 4)]}


def expectation(guided: dict[Key, bool], runs: list[dict[Key, bool]], resamples: int = 10_000):
    """The comparison rows (per optimal plan length, then all) and each instance's blind rate."""
    rates = blind_rates(runs, sorted(guided))
    lengths = sorted({optimal for _, optimal in guided})
    rows = [comparison(f"optimal plan {length} steps", {k: v for k, v in guided.items() if k[1] == length}, rates,
                       resamples) for length in lengths]
    rows.append(comparison("all", guided, rates, resamples))
    return rows, rates


@click.command()
@click.argument("model")
@click.option("--blind", multiple=True, help="One blind seed's run folders, joined with +; repeatable.")
@click.option("--blind-table", multiple=True, type=click.Path(exists=True, dir_okay=False),
              help="A table of blind seeds' outcomes (scripts/blocksworld_blind_table.py), one run per seed; repeatable.")
@click.option("--resamples", type=int, default=10_000, show_default=True)
@click.option("--out", type=click.Path(path_type=Path), required=True, help="Writes OUT.md and OUT.json.")
def main(model, blind, blind_table, resamples, out):
    if not blind and not blind_table:
        raise click.UsageError("Give the blind runs: --blind FOLDER[+FOLDER] or --blind-table FILE.")
    guided = solved_by_key(model)
    runs = [solved_by_key(pool) for pool in blind] + [run for table in blind_table for run in table_runs(Path(table))]
    rows, rates = expectation(guided, runs, resamples)
    found = {"command": " ".join(sys.argv), "model": model, "blind": list(blind), "blind_tables": list(blind_table),
             "rows": rows,
             "per_instance": [{"problem_id": k[0], "optimal": k[1], "model_solved": guided[k],
                               "blind_rate": rates[k][0], "blind_runs": rates[k][1]} for k in sorted(rates)]}
    lines = ["# The model-guided tree against the blind tree's expectation", "", f"Command: `python {found['command']}`",
             "", "| instances | n | model-guided solved | blind expected (mean over its seeds) | blind runs per instance "
             "| model - blind, points [95% paired bootstrap] |", "|---|---|---|---|---|---|"]
    lines += [f"| {r['instances']} | {r['n']} | {r['model_solved']}/{r['n']} | {r['blind_expected']:.2f}/{r['n']} "
              f"| {', '.join(map(str, r['blind_runs_per_instance']))} | {100 * r['model_minus_blind']:+.1f} "
              f"[{100 * r['ci95'][0]:+.1f}, {100 * r['ci95'][1]:+.1f}] |" for r in rows]
    write_report(out, found, "\n".join(lines), indent=1)


if __name__ == "__main__":
    main()
