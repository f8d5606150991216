"""Richer heads on a training folder's stored judge features, by cross-validation only (folds grouped
by problem, as `seed-tot train value` chooses its head): is the judge limited by its head or by its
data? Each line: out-of-fold chain AUROC and step AUROC within a problem for one head.

  python scripts/judge_head_variants.py runs/value-gsm8k-42/features-float32 --kinds point,pair

Heads: `point` is the packaged kind (logistic regression on one layer's feature, every chain's
states weighted to count once); `pair` fits the same linear score to a within-problem ranking loss
(log(1 + exp(-(s_right - s_wrong))) over every right/wrong pair of states of one problem, at most
200,000 pairs), which is what a within-problem AUROC rewards. Layer `cat` concatenates the stored
layers. No test problem is read.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import click
import torch

from seed_tot.values.head import fit_logistic, standardiser
from seed_tot.training.value.store import FeatureStore
from seed_tot.training.value.fit import chain_weights, grouped_folds, judge_metrics

MAX_PAIRS = 200_000


def layer_features(table, layer) -> torch.Tensor:
    return table.features.float().flatten(1) if layer == "cat" else table.features[:, table.layers.index(layer)].float()


def right_wrong_pairs(labels: list[bool], problems: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
    by_problem: dict[str, list[int]] = {}
    for i, problem in enumerate(problems):
        by_problem.setdefault(problem, []).append(i)
    right, wrong = [], []
    for rows in by_problem.values():
        for a in (i for i in rows if labels[i]):
            for b in (i for i in rows if not labels[i]):
                right.append(a)
                wrong.append(b)
    right, wrong = torch.tensor(right, dtype=torch.long), torch.tensor(wrong, dtype=torch.long)
    if len(right) > MAX_PAIRS:
        keep = torch.randperm(len(right), generator=torch.Generator().manual_seed(0))[:MAX_PAIRS]
        right, wrong = right[keep], wrong[keep]
    return right, wrong


def fit_pairwise(x: torch.Tensor, labels: list[bool], problems: list[str], l2: float, steps: int = 200):
    mean, scale = standardiser(x)
    z = (x - mean) / scale
    right, wrong = right_wrong_pairs(labels, problems)
    w = torch.zeros(x.shape[1], requires_grad=True)
    if len(right) == 0:
        return mean, scale, w.detach()
    difference = z[right] - z[wrong]
    optimiser = torch.optim.LBFGS([w], lr=1.0, max_iter=steps, line_search_fn="strong_wolfe")

    def closure():
        optimiser.zero_grad()
        loss = torch.nn.functional.softplus(-(difference @ w)).mean() + 0.5 * l2 * (w * w).sum()
        loss.backward()
        return loss

    with torch.enable_grad():
        optimiser.step(closure)
    return mean, scale, w.detach()


def cross_validated(table, kind: str, layer, l2: float, scope: str) -> tuple[float, float]:
    scores = torch.empty(len(table.labels))
    for held in grouped_folds(table.problem_ids(), 5, 0):
        test = torch.tensor([p in held for p in table.problems])
        train = table.subset(~test)
        rows = train if scope == "all" else train.subset(train.final)
        x = layer_features(rows, layer)
        if kind == "point":
            weights = chain_weights(rows) if scope == "all" else torch.ones(len(rows.labels))
            mean, scale, w, b = fit_logistic(x, rows.labels, weights, l2)
        else:
            (mean, scale, w), b = fit_pairwise(x, rows.labels.tolist(), rows.problems, l2), 0.0
        scores[test] = ((layer_features(table.subset(test), layer) - mean) / scale) @ w + b
    metrics = judge_metrics(torch.sigmoid(scores), table)
    return metrics["chain_auroc_within"], metrics["step_auroc_within"]


@click.command(help=__doc__)
@click.argument("features", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--kinds", default="point,pair", show_default=True)
@click.option("--l2", "l2_text", default="0.1,1,10", show_default=True)
def main(features: Path, kinds: str, l2_text: str) -> None:
    torch.set_num_threads(1)
    table = FeatureStore.open(features).table()
    click.echo(f"states {len(table.labels)} chains {int(table.final.sum())} problems {len(table.problem_ids())}")
    for kind in kinds.split(","):
        for layer in [*table.layers, "cat"]:
            for l2 in [float(v) for v in l2_text.split(",")]:
                for scope in ("final", "all"):
                    started = time.time()
                    chain, step = cross_validated(table, kind, layer, l2, scope)
                    click.echo(json.dumps({"kind": kind, "layer": layer, "l2": l2, "scope": scope, "chain_cv": chain,
                                           "step_cv": step, "s": round(time.time() - started, 1)}))


if __name__ == "__main__":
    main()
