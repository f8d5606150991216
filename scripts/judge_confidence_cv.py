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
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import click
import torch

WINDOW = 32
CONFIDENCE = ("mean_logprob", "tail_logprob", "weakest_stretch_logprob", "mean_top1", "mean_neg_entropy", "neg_sqrt_length")


def chain_confidence(logprob: torch.Tensor, top1: torch.Tensor, entropy: torch.Tensor) -> dict:
    """Per-chain features from per-token log-probability of the written token, top-1 probability and entropy."""
    stretch = logprob.unfold(0, WINDOW, 1).mean(1).min() if len(logprob) > WINDOW else logprob.mean()
    return {"mean_logprob": float(logprob.mean()), "tail_logprob": float(logprob[-WINDOW:].mean()),
            "weakest_stretch_logprob": float(stretch), "mean_top1": float(top1.mean()),
            "mean_neg_entropy": float(-entropy.mean()), "neg_sqrt_length": -math.sqrt(len(logprob))}


def token_confidence(target, prompt: list[int], reply: list[int]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(log-probability of each reply token, top-1 probability, entropy) under the target, one forward."""
    ids = torch.tensor([prompt + reply])
    with torch.no_grad():
        logits = target.forward(ids)[0, len(prompt) - 1 : -1].float()
    logp = torch.log_softmax(logits, -1)
    written = logp.gather(1, torch.tensor(reply)[:, None]).squeeze(1)
    return written, logp.max(-1).values.exp(), -(logp.exp() * logp).sum(-1)


def read_confidence(target, items, out: Path) -> None:
    """Append each chain's confidence row to OUT.jsonl, skipping problems it already holds."""
    from seed_tot.reasoning.prompting import PromptFormatter

    formatter = PromptFormatter(target.tokenizer)
    done = {json.loads(line)["problem_id"] for line in out.read_text().splitlines()} if out.is_file() else set()
    for item in items:
        if item.problem_id in done:
            continue
        prompt = formatter.encode_text(formatter.reply_prefix(item.message))
        rows = []
        for chain in item.chains:
            reply = target.tokenizer(chain.text, add_special_tokens=False)["input_ids"]
            if reply:
                rows.append({"problem_id": item.problem_id, "chain_index": chain.index, "correct": chain.correct,
                             **chain_confidence(*token_confidence(target, prompt, reply))})
        with out.open("a") as handle:
            handle.writelines(json.dumps(row) + "\n" for row in rows)
        click.echo(f"{item.problem_id}: {len(rows)} chains", err=True)


def grouped_cv_logits(x: torch.Tensor, labels: torch.Tensor, problems: list[str], l2: float) -> torch.Tensor:
    """Each row's logit from a logistic head fit on the other folds' problems."""
    from seed_tot.values.head import fit_logistic
    from seed_tot.values.training import grouped_folds

    logits = torch.empty(len(labels))
    for held in grouped_folds(sorted(set(problems)), 5, 0):
        test = torch.tensor([p in held for p in problems])
        mean, scale, w, b = fit_logistic(x[~test], labels[~test], torch.ones(int((~test).sum())), l2)
        logits[test] = ((x[test] - mean) / scale) @ w + b
    return logits


def comparison(rows: list[dict], judge_logit: dict, l2s: tuple[float, ...] = (0.01, 0.1, 1.0)) -> list[tuple[str, float]]:
    """(what scores the chains, chain AUROC within a problem) for the judge, each confidence feature,
    and the cross-validated heads on confidence alone and on the judge with confidence."""
    from seed_tot.values.training import within_problem_auroc

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
        found.append((f"logistic on confidence, L2 {l2}", within(grouped_cv_logits(confidence, labels, problems, l2))))
        both = torch.cat([judge[:, None], confidence], 1)
        found.append((f"logistic on judge + confidence, L2 {l2}", within(grouped_cv_logits(both, labels, problems, l2))))
    return found


def judge_logits(train_dir: Path) -> dict:
    """(problem id, chain index) -> the out-of-fold logit of a head with TRAIN_DIR's settings, per whole chain."""
    from seed_tot.values.head import load_head
    from seed_tot.values.store import FeatureStore
    from seed_tot.values.training import out_of_fold

    head = load_head(train_dir / "value_head.safetensors")
    store_dir = next(train_dir.glob("features-*"))
    table = FeatureStore(store_dir, json.loads((store_dir / "features.json").read_text())).table()
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
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), required=True, help="Path without suffix.")
def main(train_dir, pool, problems, target, dtype, no_read, out):
    from seed_tot.values.store import chains_of_pool
    from seed_tot_tasks import get_task

    rows_path = out.with_suffix(".jsonl")
    out.parent.mkdir(parents=True, exist_ok=True)
    if not no_read:
        from seed_tot.models.loading import load_model

        items = sorted(chains_of_pool(pool, get_task), key=lambda item: int(item.problem_id.rsplit("-", 1)[1]))
        read_confidence(load_model(target, dtype=dtype), items[:problems], rows_path)
    rows = [json.loads(line) for line in rows_path.read_text().splitlines()]
    found = comparison(rows, judge_logits(train_dir))
    read = len({r["problem_id"] for r in rows})
    lines = [f"# Token confidence beside the learned judge ({read} training problems, {len(rows)} chains)", "",
             f"Command: `python scripts/judge_confidence_cv.py {train_dir} --pool {pool} --problems {problems} --out {out}`",
             "", "| scores the chains | chain AUROC within a problem |", "|---|---|"]
    lines += [f"| {name} | {value:.4f} |" for name, value in found]
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    click.echo("\n".join(lines))


if __name__ == "__main__":
    main()
