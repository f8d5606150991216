"""Does the judge gain from reading the whole chain, not only its end? Cross-validation only.

    python scripts/judge_chain_pooling_cv.py runs/value-gsm8k-128/features-bfloat16 --l2 1,3

For each stored layer, a logistic head on whole chains (folds grouped by problem, as `seed-tot
train value` chooses its head) reads one of: `final` (the packaged feature: the residual stream
at the chain's answer), `mean` (the mean of the chain's states: the last token of every line and
the answer), `final+mean` (both, concatenated). Then two ensembles of `final` heads (their logits
summed): every stored layer, and the two deepest. Prints the out-of-fold chain AUROC within a
problem of each. No test problem is read.
"""

from __future__ import annotations

import json
from pathlib import Path

import click
import torch

from seed_tot.analysis.judge_cv import out_of_fold_logits
from seed_tot.training.value.store import FeatureStore
from seed_tot.training.value.fit import within_problem_auroc


def chain_means(table, layer_index: int) -> torch.Tensor:
    """(chains, hidden): the mean of every state of each chain at one layer."""
    count = int(table.chains.max()) + 1
    x = table.features[:, layer_index].float()
    sums = torch.zeros(count, x.shape[1]).index_add_(0, table.chains, x)
    return sums / torch.bincount(table.chains, minlength=count).float()[:, None]


def pooling_rows(table, l2s: list[float]) -> list[dict]:
    final = table.final
    labels = table.labels[final]
    problems = [p for p, f in zip(table.problems, final.tolist(), strict=True) if f]
    finals = {layer: table.features[final][:, i].float() for i, layer in enumerate(table.layers)}
    means = {layer: chain_means(table, i)[table.chains[final]] for i, layer in enumerate(table.layers)}

    def score(logits: torch.Tensor) -> float:
        return round(within_problem_auroc(logits.tolist(), labels.tolist(), problems)[0], 4)

    rows = []
    for l2 in l2s:
        logits = {}
        for layer in table.layers:
            logits[layer] = out_of_fold_logits(finals[layer], labels, problems, l2)
            both = torch.cat([finals[layer], means[layer]], 1)
            rows += [{"l2": l2, "layer": layer, "reads": "final", "chain_cv": score(logits[layer])},
                     {"l2": l2, "layer": layer, "reads": "mean",
                      "chain_cv": score(out_of_fold_logits(means[layer], labels, problems, l2))},
                     {"l2": l2, "layer": layer, "reads": "final+mean",
                      "chain_cv": score(out_of_fold_logits(both, labels, problems, l2))}]
        rows.append({"l2": l2, "layer": "all", "reads": "final, logits summed", "chain_cv": score(sum(logits.values()))})
        deepest = sorted(table.layers)[-2:]
        rows.append({"l2": l2, "layer": "+".join(map(str, deepest)), "reads": "final, logits summed",
                     "chain_cv": score(sum(logits[layer] for layer in deepest))})
    return rows


@click.command(help=__doc__)
@click.argument("features", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--l2", "l2_text", default="1,3", show_default=True)
def main(features: Path, l2_text: str) -> None:
    torch.set_num_threads(1)
    table = FeatureStore.open(features).table()
    click.echo(f"chains {int(table.final.sum())} problems {len(table.problem_ids())}")
    for row in pooling_rows(table, [float(v) for v in l2_text.split(",")]):
        click.echo(json.dumps(row))


if __name__ == "__main__":
    main()
