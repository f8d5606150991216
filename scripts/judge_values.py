"""Store the learned judge's value of every chain and state of the pools its figures are quoted on,
small enough to ship, so the votes, AUROCs and intervals re-derive without the model.

    python scripts/judge_values.py --head seed_tot/values/heads/HEAD.safetensors \
        --train results/value-gsm8k/train-pool \
        --heldout results/heldout-gsm8k-161-220/cot-pool:8 --heldout results/heldout-gsm8k-101-160/cot-pool:8 \
        --heldout results/heldout-gsm8k-43-100/cot-pool:16 --out results/value-gsm8k/judge-values

Reading (the only step that needs the target): each chain is run once through the target's first
layers, up to the deepest layer the head reads (seed_tot/values/features.py), at the head's dtype;
the features are kept in --features (resumable: an interrupted run goes on where it stopped; run it
`nice`d beside other work). Then, with no model:
- each held-out pool (POOL:SAMPLES, test problems) gets the head's values: the whole chain by the
  chain head, every earlier state by its step head;
- the training pool gets out-of-fold values for the head's own training problems (5 folds grouped by
  problem, the head's layer, penalty and scope, seed 0), which is what chooses a threshold on
  training problems only (scripts/judged_escalation.py).
Writes OUT/<pool folder>.jsonl.gz: one row per chain (problem id, chain index, correct, value, the
state values in order, whether the values are out of fold) and OUT/README.md naming the head, dtype
and the machine the features were read on.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import click

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # `python scripts/judge_values.py` from anywhere: the package and tasks/
    sys.path.insert(0, str(ROOT))


@click.command()
@click.option("--head", "head_path", type=click.Path(exists=True, dir_okay=False, path_type=Path), required=True)
@click.option("--train", "train_pool", type=click.Path(exists=True, file_okay=False, path_type=Path), default=None,
              help="The training pool the head was fit on: its training problems get out-of-fold values.")
@click.option("--heldout", multiple=True, help="POOL:SAMPLES, repeatable (test problems, never trained on).")
@click.option("--features", "features_root", type=click.Path(file_okay=False, path_type=Path),
              default=Path("runs/judge-features"), show_default=True, help="Where the read features are kept.")
@click.option("--dtype", default=None, help="Read at this dtype instead of the head's own (e.g. bfloat16 for a head "
              "fit on float32 readings: how it ranks a CPU's bfloat16 readings).")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), required=True)
def main(head_path: Path, train_pool: Path | None, heldout: tuple[str, ...], features_root: Path, dtype: str | None,
         out: Path) -> None:
    from seed_tot.analysis.judge_values import pool_name, value_rows, write_value_rows
    from seed_tot.values.head import load_head
    from seed_tot.training.value.store import chain_keys, chains_of_pool
    from seed_tot.training.value.fit import out_of_fold, predict
    from seed_tot_tasks import get_task

    head = load_head(head_path)
    if dtype is not None:
        head.meta["dtype"] = dtype
    train_ids = set(head.meta["train_problem_ids"])
    jobs = []  # (name, items, whether they are the head's training problems)
    for spec in heldout:
        pool, samples = spec.rsplit(":", 1)
        items = chains_of_pool(Path(pool), get_task, int(samples))
        leaked = sorted(item.problem_id for item in items if item.problem_id in train_ids)
        if leaked:
            raise click.ClickException(f"{pool} holds problems the head was trained on ({leaked[0]}): "
                                       "give held-out pools only.")
        jobs.append((pool_name(Path(pool)), items, False))
    if train_pool is not None:
        items = [item for item in chains_of_pool(train_pool, get_task) if item.problem_id in train_ids]
        jobs.append((pool_name(train_pool), items, True))
    stores, reading = read_features(head, jobs, features_root)
    for (name, items, training), store in zip(jobs, stores, strict=True):
        table = store.table(chain_keys(items))
        if training:  # the head saw these problems: each is valued by heads fit on the other folds
            probs = out_of_fold(table, head.layer, head.meta["l2"], head.meta["scope"], seed=0)
            if head.steps is not None:
                steps = out_of_fold(table, head.steps.layer, head.steps.meta["l2"], "all", seed=0)
                probs[~table.final] = steps[~table.final]
        else:
            probs = predict(head, table)
        rows = value_rows(table, probs, out_of_fold=training)
        write_value_rows(out / f"{name}.jsonl.gz", rows)
        click.echo(f"{name}: {len(rows)} chains, {len(table.labels)} states -> {out / f'{name}.jsonl.gz'}")
    write_about(out, head, [job[0] for job in jobs], reading)


def read_features(head, jobs, features_root: Path):
    """(one feature store per job, {name: seconds and tokens read this run}), reading with the target
    only where a chain is missing (it loads only then)."""
    from seed_tot.training.value.store import FeatureStore, chain_keys, extract

    settings = {key: head.meta[key] for key in ("target", "target_fingerprint", "dtype", "layers", "feature_rule")}
    stores = [FeatureStore(features_root / f"{name}-{settings['dtype']}", settings) for name, _, _ in jobs]
    missing = [(name, store, items) for store, (name, items, _) in zip(stores, jobs, strict=True)
               if not chain_keys(items) <= store.done()]
    reading = {}
    if missing:
        from seed_tot.models.fingerprint import weights_fingerprint
        from seed_tot.models.loading import load_model
        from seed_tot.values.features import FeatureReader
        from seed_tot.training.value.store import feature_settings

        target = load_model(settings["target"], dtype=settings["dtype"])
        found = feature_settings(target, weights_fingerprint(target.model), tuple(settings["layers"]))
        if found != settings:
            raise click.ClickException(f"This machine loads {settings['target']} differently from the head's "
                                       f"training features ({found} against {settings}).")
        for name, store, items in missing:
            reader = FeatureReader(target, tuple(settings["layers"]))
            started = time.perf_counter()
            problems = extract(store, reader, items)
            reading[name] = {"problems_read": problems, "seconds": round(time.perf_counter() - started, 1),
                             "tokens": reader.tokens_read}
    return stores, reading


def head_steps(head) -> dict | None:
    return None if head.steps is None else {"layer": head.steps.layer, "l2": head.steps.meta["l2"]}


def write_about(out: Path, head, names: list[str], reading: dict) -> None:
    """OUT/judge.json (the head, and what reading each pool cost on which machine) and OUT/README.md."""
    from seed_tot.machine_facts import cpu_facts

    about_path = out / "judge.json"
    about = json.loads(about_path.read_text()) if about_path.is_file() else {}
    if reading:  # a run that read nothing keeps the record of the run that did
        about["reading"] = {**about.get("reading", {}), **reading}
        about["reading_machine"] = cpu_facts()
    about.update({"head_id": head.head_id, "head_layer": head.layer, "head_scope": head.meta["scope"],
                  "head_l2": head.meta["l2"], "head_steps": head_steps(head), "dtype": head.meta["dtype"], "layers_read": head.meta["layers"],
                  "train_problems": len(head.meta["train_problem_ids"]), "files": [f"{n}.jsonl.gz" for n in names],
                  "out_of_fold": {"folds": 5, "seed": 0, "grouped_by": "problem"}})
    about_path.write_text(json.dumps(about, indent=1, sort_keys=True) + "\n")
    text = ["# The learned judge's values, per chain and state", "",
            f"Head `{head.head_id}` (layer {head.layer}, {head.meta['scope']} states, l2 {head.meta['l2']}; "
            f"read in {head.meta['dtype']}). Files: " + ", ".join(f"`{n}.jsonl.gz`" for n in names) + ".", "",
            "Each row is one chain: `states` are the values of its states in order (a state ends at a line end; "
            "the last is the whole chain, read by the chain head; the others by the step head), `value` the "
            "whole chain's. Rows with `out_of_fold` true are training problems valued by heads fit on the other "
            "folds (5 grouped folds, seed 0); the others are test problems valued by the head itself. "
            "judge.json records the head and what reading each pool through the target's first layers cost, "
            "and on which CPU.", "", "Written by `python scripts/judge_values.py` (its docstring has the command).", ""]
    (out / "README.md").write_text("\n".join(text))


if __name__ == "__main__":
    main()
