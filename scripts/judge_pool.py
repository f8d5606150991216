"""Measure a learned judge on a held-out pool of chains: AUROC of chains and states within a problem,
calibration, the reranking rules against self-consistency at each K, and a learning curve.

    python scripts/judge_pool.py results/heldout-gsm8k-43-100/cot-pool --train runs/value-gsm8k \
        [--curve 25,50,100,200,400] [--report results/value-gsm8k/heldout_report]
    python scripts/judge_pool.py results/heldout-gsm8k-101-160/cot-pool --head seed_tot/values/heads/HEAD.safetensors
    python scripts/judge_pool.py results/heldout-gsm8k-161-220/cot-pool --values results/value-gsm8k/judge-values \
        --samples 8 --report results/value-gsm8k/heldout_161_220_values   # no model: the stored values

--train is a `seed-tot train value --out` folder: its value_head.safetensors is measured, and its
features (features-<dtype>/) give the learning curve: heads fit with the head's own layer, penalty
and scope on the first N training problems (in the training file's order). --head measures a head
file alone (the packaged one, say): no learning curve. The pool's features are read once with the
target, dtype and layers the head names and kept in TRAIN/heldout-features-<dtype>/, or without
--train in runs/judge-features/<pool>-<dtype>/ (resumable); --dtype reads at another dtype. Writes REPORT.md and REPORT.json; the
pool's chains are test problems and are never trained on (refused if any pool problem is among the
head's training problems).
"""

from __future__ import annotations

import time
from pathlib import Path

import click

from seed_tot.errors import SeedTotError
from seed_tot.analysis.report_files import write_report

RERANK_K = (1, 2, 3, 4, 8, 16)


def line_number(problem_id: str) -> int:
    return int(problem_id.rsplit("-", 1)[-1])


@click.command()
@click.argument("pool", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--train", "train_dir", default=None, type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="A `seed-tot train value --out` folder: its head is measured, its features give the learning curve.")
@click.option("--head", "head_path", default=None, type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="A head file to measure (default: TRAIN/value_head.safetensors).")
@click.option("--curve", default="25,50,100,200,400", show_default=True, help="Training problem counts.")
@click.option("--samples", type=int, default=None, help="Use the greedy chain and samples 1..N only (default: all).")
@click.option("--dtype", default=None, help="Read the pool at this dtype (e.g. bfloat16: how a head fit on float32 "
              "readings ranks the readings of a CPU with native bfloat16). Default: the dtype the head names.")
@click.option("--values", "values_dir", default=None, type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="Measure the judge's stored values (scripts/judge_values.py) instead: no model, no learning curve.")
@click.option("--report", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Report path without suffix (default POOL/judge_report).")
def main(pool: Path, train_dir: Path | None, head_path: Path | None, curve: str, samples: int | None,
         dtype: str | None, values_dir: Path | None, report: Path | None) -> None:
    if values_dir is not None:
        run_from_values(pool, values_dir, samples, report or pool / "judge_report")
        return
    if train_dir is None and head_path is None:
        raise click.UsageError("Give --train (a `seed-tot train value --out` folder), --head (a head file) or "
                               "--values (a folder of stored values).")
    try:
        run(pool, train_dir, head_path or train_dir / "value_head.safetensors",
            [int(n) for n in curve.split(",") if n.strip()], samples, report or pool / "judge_report", dtype)
    except SeedTotError as error:
        raise click.ClickException(str(error)) from None


def run(pool: Path, train_dir: Path | None, head_path: Path, curve: list[int], samples: int | None,
        report: Path, dtype: str | None = None) -> None:
    from seed_tot.models.fingerprint import weights_fingerprint
    from seed_tot.models.loading import load_model
    from seed_tot.analysis.judge_values import rated_chains
    from seed_tot.analysis.reranking import rerank_table
    from seed_tot.values.features import FeatureReader
    from seed_tot.values.head import load_head
    from seed_tot.training.value.store import FeatureStore, chain_keys, chains_of_pool, extract, feature_settings
    from seed_tot.training.value.fit import chain_values, judge_metrics, predict
    from seed_tot_tasks import get_task

    head = load_head(head_path)
    train_ids = set(head.meta["train_problem_ids"])
    items = chains_of_pool(pool, get_task, samples)
    leaked = [item.problem_id for item in items if item.problem_id in train_ids]
    if leaked:
        raise SeedTotError(f"{pool} holds problems the head was trained on ({leaked[0]}): measure on held-out problems.")
    head_features = {key: head.meta[key] for key in ("target", "target_fingerprint", "dtype", "layers", "feature_rule")}
    head_features["dtype"] = dtype or head_features["dtype"]
    target = load_model(head_features["target"], dtype=head_features["dtype"])
    settings = feature_settings(target, weights_fingerprint(target.model), tuple(head_features["layers"]))
    if settings != head_features:
        raise SeedTotError(f"This machine loads {head_features['target']} differently from the head's training features "
                           f"({settings} against {head_features}).")
    features_dir = (train_dir / f"heldout-features-{settings['dtype']}" if train_dir is not None
                    else Path("runs/judge-features") / f"{pool.resolve().parent.name}-{pool.name}-{settings['dtype']}")
    store = FeatureStore(features_dir, settings)
    started = time.perf_counter()
    reader = FeatureReader(target, tuple(settings["layers"]))
    extract(store, reader, items)
    seconds = time.perf_counter() - started
    test = store.table(chain_keys(items))
    probs = predict(head, test)
    found = {"pool": str(pool), "samples_per_problem": samples or "all", "read_dtype": settings["dtype"], "head_id": head.head_id, "head": head_settings(head),
             "train_problems": len(train_ids), "heldout": judge_metrics(probs, test),
             "feature_seconds_this_run": round(seconds, 1), "feature_tokens_this_run": reader.tokens_read}
    # the reranking rules over the pool's sampled chains (indices 1..K), as scripts/rerank_pool.py does
    rated = rated_chains(pool, chain_values(probs, test), samples, get_task, only={item.problem_id for item in items})
    table = rerank_table(rated, f"the learned judge ({head.head_id})", RERANK_K)
    table += [""] + cheaper_than_voting(rated)
    found["learning_curve"] = learning_curve(train_dir, head, curve, test) if train_dir is not None else []
    write_report(report, found, markdown(found, table))


def run_from_values(pool: Path, values_dir: Path, samples: int | None, report: Path) -> None:
    """The same report from the values scripts/judge_values.py stored (VALUES/judge.json names the head)."""
    found, table = values_report(pool, values_dir, samples)
    write_report(report, found, markdown(found, table))


def values_report(pool: Path, values_dir: Path, samples: int | None) -> tuple[dict, list[str]]:
    """(the report's record, its reranking table) from the stored values; no model."""
    import json

    from seed_tot.analysis.judge_values import chain_values, rated_chains, read_value_rows, value_table, values_path
    from seed_tot.analysis.reranking import rerank_table
    from seed_tot.training.value.fit import judge_metrics
    from seed_tot_tasks import get_task

    about = json.loads((values_dir / "judge.json").read_text())
    rows = read_value_rows(values_path(values_dir, pool))
    test, probs = value_table(rows, samples)
    head = {"layer": about["head_layer"], "scope": about["head_scope"], "l2": about["head_l2"]}
    if about.get("head_steps"):
        head["steps"] = about["head_steps"]
    found = {"pool": str(pool), "samples_per_problem": samples or "all", "read_dtype": about["dtype"],
             "head_id": about["head_id"], "head": head, "train_problems": about["train_problems"],
             "values": str(values_dir), "heldout": judge_metrics(probs, test), "learning_curve": []}
    rated = rated_chains(pool, chain_values(rows, samples), samples, get_task, only=set(test.problem_ids()))
    table = rerank_table(rated, f"the learned judge ({about['head_id']})", RERANK_K)
    return found, table + [""] + cheaper_than_voting(rated)


def learning_curve(train_dir: Path, head, curve: list[int], test) -> list[dict]:
    """Heads fit with the head's layer, penalty and scope on the first n training problems, measured on `test`."""
    from seed_tot.training.value.store import FeatureStore
    from seed_tot.training.value.fit import fit_head, judge_metrics, predict

    train_store_dir = next(train_dir.glob("features-*"))
    train = FeatureStore.open(train_store_dir).table()
    order = sorted(train.problem_ids(), key=line_number)
    rows = []
    for n in [n for n in curve if n <= len(order)] + ([len(order)] if len(order) not in curve else []):
        first = train.of_problems(set(order[:n]))
        small = fit_head(first, head.layer, head.meta["l2"], head.meta["scope"])
        if head.steps is not None:
            small.steps = fit_head(first, head.steps.layer, head.steps.meta["l2"], "all")
        metrics = judge_metrics(predict(small, test), test)
        rows.append({"train_problems": n, **{k: metrics[k] for k in ("chain_auroc_within", "state_auroc_within",
                                                                     "step_auroc_within", "chain_auroc_pooled",
                                                                     "brier_chains", "ece_states")}})
    return rows


def head_settings(head) -> dict:
    settings = {k: head.meta[k] for k in ("layer", "scope", "l2")}
    if head.steps is not None:
        settings["steps"] = {"layer": head.steps.layer, "l2": head.steps.meta["l2"]}
    return settings


def cheaper_than_voting(rated: dict, against: int = 8, resamples: int = 10_000) -> list[str]:
    """Fewer chains for the same accuracy: each rule at K = 2, 3, 4 rated chains against the plain vote
    of `against` of the same sampled chains (fewer where a problem has fewer), per problem, with a
    paired bootstrap over problems."""
    from seed_tot.observe.paired_stats import expected_vote_accuracy, paired_bootstrap
    from seed_tot.analysis.reranking import weighted_vote_credit
    from seed_tot.observe.rerank import best_chain_credit, expected_credit

    ids = sorted(rated)
    against = min([against] + [len(rated[pid][0]) for pid in ids])
    vote = [expected_vote_accuracy([answer for answer, _ in rated[pid][0]], rated[pid][1], against) for pid in ids]
    lines = [f"Against the plain vote of {against} chains ({sum(vote):.2f}/{len(ids)}, exact mean over the pool's "
             f"{against}-subsets):", "", "| rule | K | accuracy | - vote of " + str(against) + " (95% paired bootstrap) |",
             "|---|---|---|---|"]
    for name, rule in (("best-of-K", best_chain_credit), ("value-weighted vote", weighted_vote_credit)):
        for k in (2, 3, 4):
            if k > min(len(rated[pid][0]) for pid in ids):
                continue
            got = [expected_credit(rule, rated[pid][0], rated[pid][1], k) for pid in ids]
            low, high = paired_bootstrap([g - v for g, v in zip(got, vote)], resamples=resamples)
            lines.append(f"| {name} | {k} | {sum(got):.2f}/{len(ids)} | {(sum(got) - sum(vote)) / len(ids):+.1%} "
                         f"[{low:+.1%}, {high:+.1%}] |")
    return lines


def markdown(found: dict, table: list[str]) -> str:
    held = found["heldout"]
    lines = [f"# Learned judge {found['head_id']} on {found['pool']}", "",
             f"Head: layer {found['head']['layer']}, {found['head']['scope']} states, l2 {found['head']['l2']}, "
             f"trained on {found['train_problems']} training problems."
             + (f" Step head (states without an answer): layer {found['head']['steps']['layer']}, every state, "
                f"l2 {found['head']['steps']['l2']}." if "steps" in found["head"] else ""), "",
             f"Held-out: {held['problems']} problems, {held['chains']} chains (greedy + samples), {held['states']} states; "
             f"{held['correct_share']:.1%} of chains correct.", "",
             "| measure | value |", "|---|---|"]
    for key in ("chain_auroc_within", "chain_problems_with_both", "state_auroc_within", "step_auroc_within",
                "step_problems_with_both", "chain_auroc_pooled", "state_auroc_pooled", "brier_chains", "ece_states"):
        lines.append(f"| {key.replace('_', ' ')} | {held.get(key)} |")
    lines += ["", "Calibration (states): " + "; ".join(
        f"{b['range'][0]:.1f}-{b['range'][1]:.1f}: {b['predicted']:.2f} predicted, {b['observed']:.2f} observed ({b['count']})"
        for b in held["calibration_states"]), "", "## Reranking the sampled chains", ""] + table
    if not found["learning_curve"]:
        return "\n".join(lines)
    lines += ["", "## Learning curve (held-out, same layer / penalty / scope)", "",
              "| training problems | chain AUROC within | state AUROC within | step AUROC within | chain AUROC pooled | Brier (chains) | ECE (states) |",
              "|---|---|---|---|---|---|---|"]
    lines += [f"| {r['train_problems']} | {r['chain_auroc_within']} | {r['state_auroc_within']} | "
              f"{r.get('step_auroc_within')} | {r['chain_auroc_pooled']} | {r['brier_chains']} | {r['ece_states']} |"
              for r in found["learning_curve"]]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
