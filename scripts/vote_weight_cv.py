"""How strongly a vote should lean on the learned judge, chosen on training problems only.

The value-weighted vote scores each answer by the sum of value**power over its chains: power 0 is
the plain vote, 1 the GSM8K default's rule, large powers approach best-of-K. Here every training
chain gets its value from a head fit on the other folds' problems (grouped folds, the layer, L2 and
scope the training run chose), so no chain is valued by a head that saw its problem; then each
power's exact expected accuracy over every K-subset of each problem's sampled chains, against
power 1 with a paired bootstrap over problems. Writes OUT.md and OUT.json.

    python scripts/vote_weight_cv.py runs/value-gsm8k-110 --pool results/value-gsm8k/train-pool --out results/value-gsm8k/vote_weight_cv
"""

from __future__ import annotations

import json
import sys
from functools import partial
from pathlib import Path

import click

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # `python scripts/vote_weight_cv.py` from anywhere: the package and tasks/
    sys.path.insert(0, str(ROOT))

POWERS = (0.0, 0.5, 1.0, 2.0, 4.0, 8.0)


def out_of_fold_chain_values(train_dir: Path, seed: int) -> dict[tuple[str, int], float]:
    """(problem id, chain index) -> the whole chain's value from a head that never saw its problem."""
    from seed_tot.training.value.store import FeatureStore
    from seed_tot.training.value.fit import chain_values, out_of_fold

    report = json.loads((train_dir / "fit_report.json").read_text())
    chosen = report["chosen"]
    store_dir = next(train_dir.glob("features-*"))
    table = FeatureStore.open(store_dir).table()
    return chain_values(out_of_fold(table, chosen["layer"], chosen["l2"], chosen["scope"], seed=seed), table)


def rated_chains(pool: Path, values: dict, samples: int) -> dict[str, tuple[list, set]]:
    """{problem id: ([(answer, value)] of its first `samples` sampled chains, correct answers)}."""
    from seed_tot.observe.comparison import bundled_loader, pool_chains
    from seed_tot_tasks import get_task

    rated = {}
    for pid, (_, chains) in pool_chains(pool, get_task, bundled_loader()).items():
        if (pid, 1) not in values:
            continue
        pairs = [(answer, values.get((pid, i)) if answer is not None else None)
                 for i, answer in enumerate(chains.answers[:samples], 1)]
        if len(pairs) == samples:
            rated[pid] = (pairs, chains.correct)
    return rated


def power_rows(rated: dict, ks: tuple[int, ...], resamples: int) -> list[dict]:
    from seed_tot.observe.paired_stats import paired_bootstrap
    from seed_tot.analysis.reranking import weighted_vote_credit
    from seed_tot.observe.rerank import expected_credit

    ids = sorted(rated)
    rows = []
    for k in ks:
        credit = {power: [expected_credit(partial(weighted_vote_credit, power=power), *rated[pid], k) for pid in ids]
                  for power in POWERS}
        for power in POWERS:
            differences = [a - b for a, b in zip(credit[power], credit[1.0])]
            low, high = paired_bootstrap(differences, resamples=resamples)
            rows.append({"k": k, "power": power, "correct": round(sum(credit[power]), 2), "problems": len(ids),
                         "minus_power_1": round(sum(differences) / len(ids), 4), "ci95": [round(low, 4), round(high, 4)]})
    return rows


@click.command()
@click.argument("train_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--pool", type=click.Path(exists=True, file_okay=False, path_type=Path), required=True,
              help="The training rollouts the head was fit on.")
@click.option("--samples", type=int, default=8, show_default=True)
@click.option("--ks", default="4,8", show_default=True)
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the grouped folds.")
@click.option("--resamples", type=int, default=10_000, show_default=True)
@click.option("--out", type=click.Path(path_type=Path), required=True, help="Writes OUT.md and OUT.json.")
def main(train_dir: Path, pool: Path, samples: int, ks: str, seed: int, resamples: int, out: Path) -> None:
    from seed_tot.analysis.report_files import write_report

    values = out_of_fold_chain_values(train_dir, seed)
    rated = rated_chains(pool, values, samples)
    rows = power_rows(rated, tuple(int(k) for k in ks.split(",")), resamples)
    lines = [f"# The vote's power of the judge's value, cross-validated on {len(rated)} training problems", "",
             f"Command: `python {' '.join(sys.argv)}`", "",
             "| K | power | expected correct | - power 1 (95% paired bootstrap) |", "|---|---|---|---|"]
    lines += [f"| {r['k']} | {r['power']:g} | {r['correct']:.2f}/{r['problems']} | {r['minus_power_1']:+.1%} "
              f"[{r['ci95'][0]:+.1%}, {r['ci95'][1]:+.1%}] |" for r in rows]
    write_report(out, {"train_dir": str(train_dir), "pool": str(pool), "seed": seed, "rows": rows}, "\n".join(lines),
                 indent=1)


if __name__ == "__main__":
    main()
