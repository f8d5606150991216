"""Does the target's own token confidence add to the learned judge? Cross-validation on training problems.

    python scripts/judge_confidence_cv.py runs/value-gsm8k-s12 --pool results/value-gsm8k/train-pool \
        --problems 60 --out results/value-gsm8k/confidence_cv

1. Confidence (needs the target; resumable: OUT.jsonl gains a row per chain, problem by problem).
   For the first `--problems` training problems of the pool (by line number), one full forward of
   the target over the chain-of-thought prompt and each chain gives, at every reply token, the
   log-probability of the token written, the top token's probability and the entropy (the raw
   distribution, temperature 1). Per chain: their means, the mean log-probability of the last 32
   tokens, the lowest mean log-probability of any 32 consecutive tokens (the weakest stretch),
   and the length.
2. Cross-validation (no model): each chain's learned-judge logit comes from a head with TRAIN_DIR's
   settings fit on the other folds' problems (folds grouped by problem, as `seed-tot train value`
   chooses its head); then logistic heads on the confidence features alone, and on the judge's
   logit with them, are fit the same way. Prints and writes (OUT.md) the chain AUROC within a
   problem of each. No test problem is read.
3. Held out (`--heldout POOL:SAMPLES`, optional; needs the target unless OUT-heldout.jsonl holds
   every chain): the same confidence for the pool's greedy chain and samples 1..SAMPLES, the judge's
   logit from TRAIN_DIR's head on the held-out features `scripts/judge_pool.py --train TRAIN_DIR`
   stored, and a logistic head on judge + confidence fit on every training row (the L2 the
   cross-validation chose) scores them: chain AUROC within a problem beside the judge alone.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import click
import torch

from seed_tot.analysis.token_confidence import read_each_problem, token_confidence

WINDOW = 32
CONFIDENCE = ("mean_logprob", "tail_logprob", "weakest_stretch_logprob", "mean_top1", "mean_neg_entropy", "neg_sqrt_length")


def chain_confidence(logprob: torch.Tensor, top1: torch.Tensor, entropy: torch.Tensor) -> dict:
    """Per-chain features from per-token log-probability of the written token, top-1 probability and entropy."""
    stretch = logprob.unfold(0, WINDOW, 1).mean(1).min() if len(logprob) > WINDOW else logprob.mean()
    return {"mean_logprob": float(logprob.mean()), "tail_logprob": float(logprob[-WINDOW:].mean()),
            "weakest_stretch_logprob": float(stretch), "mean_top1": float(top1.mean()),
            "mean_neg_entropy": float(-entropy.mean()), "neg_sqrt_length": -math.sqrt(len(logprob))}


def read_confidence(target, items, out: Path) -> None:
    """Append each chain's confidence row to OUT.jsonl, skipping problems it already holds."""

    def rows_of(item, prompt: list[int]) -> list[dict]:
        rows = []
        for chain in item.chains:
            reply = target.tokenizer(chain.text, add_special_tokens=False)["input_ids"]
            if reply:
                rows.append({"problem_id": item.problem_id, "chain_index": chain.index, "correct": chain.correct,
                             **chain_confidence(*token_confidence(target, prompt, reply))})
        return rows

    read_each_problem(target, items, out, rows_of)


def comparison(rows: list[dict], judge_logit: dict, l2s: tuple[float, ...] = (0.01, 0.1, 1.0)) -> list[tuple[str, float]]:
    """(what scores the chains, chain AUROC within a problem) for the judge, each confidence feature,
    and the cross-validated heads on confidence alone and on the judge with confidence."""
    from seed_tot.analysis.judge_cv import out_of_fold_logits
    from seed_tot.training.value.fit import within_problem_auroc

    rows = [r for r in rows if (r["problem_id"], r["chain_index"]) in judge_logit]
    labels = torch.tensor([r["correct"] for r in rows])
    problems = [r["problem_id"] for r in rows]
    judge = torch.tensor([judge_logit[(r["problem_id"], r["chain_index"])] for r in rows])
    confidence = torch.tensor([[r[name] for name in CONFIDENCE] for r in rows])

    def within(scores: torch.Tensor) -> float:
        return round(within_problem_auroc(scores.tolist(), labels.tolist(), problems)[0], 4)

    found = [("learned judge (out of fold)", within(judge))]
    found += [(name, within(confidence[:, i])) for i, name in enumerate(CONFIDENCE)]
    for l2 in l2s:
        found.append((f"logistic on confidence, L2 {l2}", within(out_of_fold_logits(confidence, labels, problems, l2))))
        both = torch.cat([judge[:, None], confidence], 1)
        found.append((f"logistic on judge + confidence, L2 {l2}", within(out_of_fold_logits(both, labels, problems, l2))))
    return found


def best_l2(found: list[tuple[str, float]]) -> float:
    """The L2 of the cross-validated judge + confidence head with the best AUROC."""
    rows = [(value, name) for name, value in found if name.startswith("logistic on judge + confidence")]
    return float(max(rows)[1].rsplit(" ", 1)[1])


def fit_and_score(train_rows: list[dict], train_logit: dict, test_rows: list[dict], test_logit: dict,
                  l2: float) -> torch.Tensor:
    """Logits of a judge + confidence head fit on every training row, for the test rows."""
    from seed_tot.values.head import fit_logistic

    def design(rows, logit):
        return torch.tensor([[logit[(r["problem_id"], r["chain_index"])], *(r[n] for n in CONFIDENCE)] for r in rows])

    train_rows = [r for r in train_rows if (r["problem_id"], r["chain_index"]) in train_logit]
    x = design(train_rows, train_logit)
    mean, scale, w, b = fit_logistic(x, torch.tensor([r["correct"] for r in train_rows]), torch.ones(len(x)), l2)
    return ((design(test_rows, test_logit) - mean) / scale) @ w + b


def heldout_logits(train_dir: Path, pool: Path, samples: int) -> dict:
    """(problem id, chain index) -> TRAIN_DIR's head's logit for the pool's whole chains (stored features)."""
    from seed_tot.values.head import load_head
    from seed_tot.training.value.store import FeatureStore, chain_keys, chains_of_pool
    from seed_tot_tasks import get_task

    head = load_head(train_dir / "value_head.safetensors")
    store_dir = next(train_dir.glob("heldout-features-*"))
    store = FeatureStore.open(store_dir)
    table = store.table(chain_keys(chains_of_pool(pool, get_task, samples)))
    probs = head.probability(table.features[:, table.layers.index(head.layer)]).clamp(1e-7, 1 - 1e-7)
    return {(p, int(i)): float(torch.logit(v)) for p, i, v, final in
            zip(table.problems, table.chain_index.tolist(), probs, table.final.tolist(), strict=True) if final}


def judge_logits(train_dir: Path) -> dict:
    """(problem id, chain index) -> the out-of-fold logit of a head with TRAIN_DIR's settings, per whole chain."""
    from seed_tot.values.head import load_head
    from seed_tot.training.value.store import FeatureStore
    from seed_tot.training.value.fit import out_of_fold

    head = load_head(train_dir / "value_head.safetensors")
    store_dir = next(train_dir.glob("features-*"))
    table = FeatureStore.open(store_dir).table()
    probs = out_of_fold(table, head.layer, head.meta["l2"], head.meta["scope"]).clamp(1e-7, 1 - 1e-7)
    return {(p, int(i)): float(torch.logit(v)) for p, i, v, final in
            zip(table.problems, table.chain_index.tolist(), probs, table.final.tolist(), strict=True) if final}


@click.command(help=__doc__)
@click.argument("train_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--pool", type=click.Path(exists=True, file_okay=False, path_type=Path), required=True)
@click.option("--problems", default=60, show_default=True)
@click.option("--target", default="default-target", show_default=True)
@click.option("--dtype", default="auto", show_default=True)
@click.option("--no-read", is_flag=True, help="Only cross-validate the rows OUT.jsonl holds (no model).")
@click.option("--heldout", default=None, help="POOL:SAMPLES of held-out chains to score with judge + confidence.")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), required=True, help="Path without suffix.")
def main(train_dir, pool, problems, target, dtype, no_read, heldout, out):
    from seed_tot.training.value.store import chains_of_pool
    from seed_tot_tasks import get_task

    rows_path = out.with_suffix(".jsonl")
    out.parent.mkdir(parents=True, exist_ok=True)
    model = None
    if not no_read:
        from seed_tot.models.loading import load_model

        model = load_model(target, dtype=dtype)
        items = sorted(chains_of_pool(pool, get_task), key=lambda item: int(item.problem_id.rsplit("-", 1)[1]))
        read_confidence(model, items[:problems], rows_path)
    rows = [json.loads(line) for line in rows_path.read_text().splitlines()]
    train_logit = judge_logits(train_dir)
    found = comparison(rows, train_logit)
    read = len({r["problem_id"] for r in rows})
    lines = [f"# Token confidence beside the learned judge ({read} training problems, {len(rows)} chains)", "",
             f"Command: `python scripts/judge_confidence_cv.py {train_dir} --pool {pool} --problems {problems} "
             f"--dtype {dtype}" + (f" --heldout {heldout}" if heldout else "") + f" --out {out}` (rows read; "
             "`--no-read` re-derives the tables from the stored rows without the model)",
             "", "| scores the chains | chain AUROC within a problem |", "|---|---|"]
    lines += [f"| {name} | {value:.4f} |" for name, value in found]
    if heldout:
        lines += held_out_lines(train_dir, heldout, rows, train_logit, best_l2(found), model, target, dtype, out)
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    click.echo("\n".join(lines))


def held_out_lines(train_dir, heldout, rows, train_logit, l2, model, target, dtype, out) -> list[str]:
    from seed_tot.training.value.store import chains_of_pool
    from seed_tot.training.value.fit import within_problem_auroc
    from seed_tot_tasks import get_task

    pool, samples = heldout.rsplit(":", 1)
    items = chains_of_pool(Path(pool), get_task, int(samples))
    test_path = out.with_name(out.name + "-heldout.jsonl")
    if model is not None:
        read_confidence(model, items, test_path)
    test_rows = [json.loads(line) for line in test_path.read_text().splitlines()]
    test_logit = heldout_logits(train_dir, Path(pool), int(samples))
    test_rows = [r for r in test_rows if (r["problem_id"], r["chain_index"]) in test_logit]
    labels = [r["correct"] for r in test_rows]
    problems = [r["problem_id"] for r in test_rows]
    judge = [test_logit[(r["problem_id"], r["chain_index"])] for r in test_rows]
    both = fit_and_score(rows, train_logit, test_rows, test_logit, l2)
    judge_auc, mixed = within_problem_auroc(judge, labels, problems)
    both_auc, _ = within_problem_auroc(both.tolist(), labels, problems)
    top1 = within_problem_auroc([r["mean_top1"] for r in test_rows], labels, problems)[0]
    return ["", f"Held out: {heldout} ({len({*problems})} problems, {len(test_rows)} chains, {mixed} with right "
            f"and wrong chains); judge + confidence fit on every training row at L2 {l2}.", "",
            "| scores the chains | chain AUROC within a problem |", "|---|---|",
            f"| learned judge ({train_dir}) | {judge_auc:.4f} |", f"| mean_top1 | {top1:.4f} |",
            f"| judge + confidence | {both_auc:.4f} |"]


if __name__ == "__main__":
    main()
