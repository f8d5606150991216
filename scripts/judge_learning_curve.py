"""How many training problems would the learned judge need? A learning curve with an interval.

    python scripts/judge_learning_curve.py runs/value-gsm8k-128 \
        --heldout results/heldout-gsm8k-43-100/cot-pool:16 --heldout results/heldout-gsm8k-101-160/cot-pool:8 \
        --sizes 16,32,48,64,96,128 --draws 10 --goal 0.80 --out results/value-gsm8k/learning_curve_128_problems

TRAIN_DIR is a `seed-tot train value --out` folder whose held-out features were already read by
`scripts/judge_pool.py --train TRAIN_DIR` (TRAIN_DIR/heldout-features-<dtype>/): no model is loaded.
For each size n, `--draws` random sets of n training problems (seeded; one set at the full size)
each fit a head with the packaged head's settings (layer, penalty, scope of TRAIN_DIR's head); each
head's chain AUROC within a problem is measured on every held-out pool (POOL:SAMPLES: the greedy
chain and samples 1..SAMPLES). Averaging over draws removes most of the noise of which problems
came first. Then AUROC = a + b ln(n) is fit to the mean curve's upper part (sizes from `--fit-from`,
default half the largest: the curve flattens, so the small sizes would steepen the line), and the n
where it reaches `--goal` is read off (the first measured size whose mean reaches it, where one does); its 95% interval resamples the held-out problems (bootstrap, the same
resample for every head), which is the larger noise. With several pools, a last row pools their
problems. A log-linear curve keeps climbing where a
real one flattens, so the n it gives is a lower bound on what the goal needs, not a promise.
"""

from __future__ import annotations

import math
import random
from pathlib import Path

import click
import torch



def per_problem_auroc(scores: torch.Tensor, table) -> dict[str, float]:
    """Chain AUROC within each problem that has right and wrong whole chains."""
    from seed_tot.training.value.fit import per_problem_auroc as within_each

    final = table.final.tolist()
    pick = lambda values: [v for v, f in zip(values, final, strict=True) if f]  # noqa: E731
    return within_each(pick(scores.tolist()), pick(table.labels.tolist()), pick(table.problems))


def log_fit(sizes: list[int], values: list[float]) -> tuple[float, float]:
    """(a, b) of the least-squares line values = a + b ln(sizes)."""
    xs = [math.log(n) for n in sizes]
    mx, my = sum(xs) / len(xs), sum(values) / len(values)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, values)) / sum((x - mx) ** 2 for x in xs)
    return my - b * mx, b


def problems_needed(a: float, b: float, goal: float) -> float:
    """The n where a + b ln(n) = goal (infinite when the curve does not climb)."""
    exponent = (goal - a) / b if b > 0 else math.inf
    return math.exp(exponent) if exponent < 700 else math.inf


def curve_fit(auc: dict[tuple[int, int], dict[str, float]], sizes: list[int], problems: list[str],
              goal: float, fit_from: int) -> dict:
    """Mean AUROC per size over draws and over `problems` (one held-out sample), the fit and the n
    reaching the goal."""
    means = []
    for n in sizes:
        per_draw = [sum(values[p] for p in problems) / len(problems) for (size, _), values in auc.items() if size == n]
        means.append(sum(per_draw) / len(per_draw))
    upper = [i for i, n in enumerate(sizes) if n >= fit_from]
    a, b = log_fit([sizes[i] for i in upper], [means[i] for i in upper])
    reached = next((n for n, mean in zip(sizes, means) if mean >= goal), None)
    return {"means": means, "a": a, "b": b, "needed": reached or problems_needed(a, b, goal)}


def bootstrap_needed(auc, sizes, problems, goal, fit_from: int, resamples: int, seed: int = 0) -> list[float]:
    """2.5%, 50% and 97.5% quantiles of the n needed over resamples of the held-out problems."""
    rng = random.Random(seed)
    found = sorted(curve_fit(auc, sizes, rng.choices(problems, k=len(problems)), goal, fit_from)["needed"]
                   for _ in range(resamples))
    return [found[int(q * (len(found) - 1))] for q in (0.025, 0.5, 0.975)]


def shown(n: float, smallest: int, largest: int) -> str:
    """n for a table: below the fitted sizes or far beyond them the line says little more than that."""
    if math.isinf(n) or n > 100 * largest:
        return f"> {100 * largest:,}"
    return f"< {smallest}" if n < smallest else f"{n:,.0f}"


def rounded(n: float) -> int | None:
    return None if math.isinf(n) else round(n)


@click.command(help=__doc__)
@click.argument("train_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--heldout", "heldout", multiple=True, required=True, help="POOL:SAMPLES, repeatable.")
@click.option("--sizes", default="16,32,48,64,96,128", show_default=True)
@click.option("--draws", default=10, show_default=True, help="Random training sets per size.")
@click.option("--goal", default=0.80, show_default=True, help="The chain AUROC within a problem to reach.")
@click.option("--fit-from", type=int, default=None, help="Fit the line to sizes from this one (default: half the largest).")
@click.option("--resamples", default=2000, show_default=True)
@click.option("--seed", default=0, show_default=True)
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), required=True, help="Report path without suffix.")
def main(train_dir, heldout, sizes, draws, goal, fit_from, resamples, seed, out):
    from seed_tot.analysis.report_files import write_report
    from seed_tot.values.head import load_head
    from seed_tot.analysis.judge_cv import heldout_tables
    from seed_tot.training.value.store import FeatureStore
    from seed_tot.training.value.fit import fit_head
    from seed_tot_tasks import get_task

    torch.set_num_threads(1)
    head = load_head(train_dir / "value_head.safetensors")
    layer, l2, scope = head.layer, head.meta["l2"], head.meta["scope"]
    train_store = next(train_dir.glob("features-*"))
    train = FeatureStore.open(train_store).table()
    all_ids = sorted(train.problem_ids())
    sizes = sorted({n for n in (int(s) for s in sizes.split(",")) if n <= len(all_ids)} | {len(all_ids)})
    fit_from = fit_from or sizes[-1] // 2
    if len([n for n in sizes if n >= fit_from]) < 2:
        raise click.UsageError(f"Give at least two sizes from --fit-from {fit_from} on.")
    tests = heldout_tables(train_dir, list(heldout), get_task)
    rng = random.Random(seed)
    auc = {name: {} for name in tests}
    for n in sizes:
        for draw in range(1 if n == len(all_ids) else draws):
            chosen = set(rng.sample(all_ids, n))
            fitted = fit_head(train.of_problems(chosen), layer, l2, scope)
            for name, table in tests.items():
                scores = fitted.probability(table.features[:, table.layers.index(layer)])
                auc[name][(n, draw)] = per_problem_auroc(scores, table)
        click.echo(f"{n} training problems fit", err=True)
    if len(tests) > 1:  # the pools' problems together: one curve with more problems behind it
        auc["all pools"] = {key: {p: v for per_pool in auc.values() for p, v in per_pool[key].items()}
                            for key in next(iter(auc.values()))}
    found = {"train_dir": str(train_dir), "head": {"layer": layer, "l2": l2, "scope": scope}, "sizes": sizes,
             "fit_from": fit_from,
             "draws": draws, "goal": goal, "seed": seed, "resamples": resamples, "heldout": {}}
    lines = [f"# How many training problems the judge needs (goal: chain AUROC within {goal})", "",
             "Command: `python scripts/judge_learning_curve.py " + str(train_dir) + " "
             + " ".join(f"--heldout {h}" for h in heldout) + f" --sizes {','.join(map(str, sizes))} --draws {draws}"
             + f" --goal {goal} --fit-from {fit_from} --out {out}`", "",
             f"Head settings of {train_dir}: layer {layer}, L2 {l2}, {scope} states; {draws} random training sets "
             "per size (one at the full size). Mean chain AUROC within a problem:", "",
             "| held-out pool | problems with both | " + " | ".join(f"n = {n}" for n in sizes)
             + f" | fit a + b ln n (n >= {fit_from}) | n reaching the goal (95% bootstrap) |",
             "|---|---|" + "---|" * len(sizes) + "---|---|"]
    for name, per_head in auc.items():
        problems = sorted(next(iter(per_head.values())))
        fit = curve_fit(per_head, sizes, problems, goal, fit_from)
        low, mid, high = bootstrap_needed(per_head, sizes, problems, goal, fit_from, resamples, seed)
        found["heldout"][name] = {"problems_with_both": len(problems), "mean_auroc": dict(zip(map(str, sizes),
                                  (round(m, 4) for m in fit["means"]))), "a": round(fit["a"], 4), "b": round(fit["b"], 4),
                                  "needed": rounded(fit["needed"]),
                                  "needed_interval": [rounded(low), rounded(high)], "needed_median": rounded(mid)}
        lines.append(f"| {name} | {len(problems)} | " + " | ".join(f"{m:.3f}" for m in fit["means"])
                     + f" | {fit['a']:.3f} + {fit['b']:.4f} ln n | {shown(fit['needed'], fit_from, sizes[-1])} "
                     f"[{shown(low, fit_from, sizes[-1])}, {shown(high, fit_from, sizes[-1])}] |")
    write_report(out, found, "\n".join(lines))


if __name__ == "__main__":
    main()
