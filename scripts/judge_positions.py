"""Where in a whole chain does the target's hidden state tell best whether the chain is right?

One forward per chain reads three positions at a few layers: the chain's last token, the token
before the answer's last occurrence, and the answer's last token. For each (position, layer, L2)
a logistic head is fit on the training pool's whole chains; it is scored by grouped 5-fold CV on
the training problems (3 fold seeds) and, fit on all of them, on the held-out pool. The setting
to use is the one CV picks; the held-out column is for reporting, never for choosing.

    python scripts/judge_positions.py results/value-gsm8k/train-pool results/heldout-gsm8k-43-100/cot-pool \
        --heldout-samples 4 --layers 7,10,14 --out results/value-gsm8k/where-to-read --features runs/where-to-read

Features are kept in --features (default OUT/features/: train.pt, heldout.pt): a rerun only fits.
Writes OUT/report.json.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import click
import torch

POSITIONS = ("last", "before_answer", "answer")
L2S = (0.1, 1.0, 10.0)


def chain_readings(pool: Path, samples: int | None) -> list[dict]:
    from seed_tot.values.states import answer_end
    from seed_tot.training.value.store import chains_of_pool
    from seed_tot_tasks import get_task

    rows = []
    for item in chains_of_pool(pool, get_task, samples):
        for chain in item.chains:
            if not chain.text:
                continue
            end = len(chain.text)
            after = answer_end(chain.text, chain.answer)
            before = after - len(chain.answer) if after is not None else end
            rows.append({"pid": item.problem_id, "index": chain.index, "correct": chain.correct,
                         "found": after is not None, "message": item.message, "text": chain.text,
                         "ends": (end, max(before, 1), after or end)})
    return rows


def features_of(path: Path, rows: list[dict], reader) -> dict:
    from seed_tot.values.features import Reading

    if path.is_file():
        return torch.load(path)
    started = time.perf_counter()
    features = reader.read([Reading(r["message"], r["text"], r["ends"]) for r in rows])
    data = {"features": torch.stack(features).to(torch.float16), "seconds": round(time.perf_counter() - started, 1),
            "rows": [{k: r[k] for k in ("pid", "index", "correct", "found")} for r in rows]}
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(data, path)
    return data


def fit(x: torch.Tensor, y: torch.Tensor, l2: float):
    from seed_tot.values.head import ValueHead, fit_logistic

    mean, scale, weight, bias = fit_logistic(x.float(), y, torch.ones(len(y)), l2)
    return ValueHead(layer=0, mean=mean, scale=scale, weight=weight, bias=bias)


def cv_auroc(x: torch.Tensor, y: torch.Tensor, pids: list[str], l2: float, seeds=(0, 1, 2)) -> float:
    from seed_tot.training.value.fit import grouped_folds, within_problem_auroc

    found = []
    for seed in seeds:
        probs = torch.empty(len(y))
        for held in grouped_folds(sorted(set(pids)), 5, seed):
            test = torch.tensor([p in held for p in pids])
            probs[test] = fit(x[~test], y[~test], l2).probability(x[test])
        found.append(within_problem_auroc(probs.tolist(), y.tolist(), pids)[0])
    return sum(found) / len(found)


@click.command()
@click.argument("train_pool", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.argument("heldout_pool", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--heldout-samples", type=int, default=None, help="Greedy + the first N samples of each held-out problem.")
@click.option("--layers", default="7,10,14", show_default=True)
@click.option("--target", default="default-target", show_default=True)
@click.option("--dtype", default="auto", show_default=True)
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), required=True)
@click.option("--features", "feature_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Where the features are kept (default OUT/features; tens of MB).")
def main(train_pool: Path, heldout_pool: Path, heldout_samples: int | None, layers: str, target: str, dtype: str,
         out: Path, feature_dir: Path | None) -> None:
    from seed_tot.models.loading import load_model
    from seed_tot.values.features import FeatureReader
    from seed_tot.training.value.fit import within_problem_auroc

    layer_list = tuple(int(n) for n in layers.split(","))
    train_rows = chain_readings(train_pool, None)
    test_rows = chain_readings(heldout_pool, heldout_samples)
    leaked = {r["pid"] for r in train_rows} & {r["pid"] for r in test_rows}
    if leaked:
        raise click.ClickException(f"{heldout_pool} shares problems with the training pool ({sorted(leaked)[0]}).")
    feature_dir = feature_dir or out / "features"
    reader = None
    if not (feature_dir / "train.pt").is_file() or not (feature_dir / "heldout.pt").is_file():
        reader = FeatureReader(load_model(target, dtype=dtype), layer_list)
    train = features_of(feature_dir / "train.pt", train_rows, reader)
    test = features_of(feature_dir / "heldout.pt", test_rows, reader)
    y = torch.tensor([r["correct"] for r in train["rows"]])
    pids = [r["pid"] for r in train["rows"]]
    results = []
    for p, position in enumerate(POSITIONS):
        for j, layer in enumerate(layer_list):
            for l2 in L2S:
                x = train["features"][:, p, j]
                head = fit(x, y, l2)
                held, n = within_problem_auroc(head.probability(test["features"][:, p, j]).tolist(),
                                               [r["correct"] for r in test["rows"]], [r["pid"] for r in test["rows"]])
                results.append({"position": position, "layer": layer, "l2": l2, "cv": round(cv_auroc(x, y, pids, l2), 4),
                                "heldout": round(held, 4), "n": n})
                click.echo(json.dumps(results[-1]))
    report = {"train_pool": str(train_pool), "heldout_pool": str(heldout_pool), "heldout_samples": heldout_samples,
              "target": target, "dtype": dtype, "layers": list(layer_list),
              "train_chains": len(train["rows"]), "train_problems": len(set(pids)),
              "answer_found_train": sum(r["found"] for r in train["rows"]),
              "heldout_chains": len(test["rows"]), "answer_found_heldout": sum(r["found"] for r in test["rows"]),
              "feature_seconds": [train["seconds"], test["seconds"]], "results": results,
              "chosen_by_cv": max(results, key=lambda r: r["cv"])}
    (out / "report.json").write_text(json.dumps(report, indent=1) + "\n")
    click.echo(f"chosen by CV: {report['chosen_by_cv']}")


if __name__ == "__main__":
    main()
