"""Does the target's own token confidence rank a chain's partial states? The gate a process signal
must pass before a tree is steered by it, measured on training problems only.

    python scripts/step_confidence_auroc.py --pool results/value-gsm8k/train-pool --problems 60 \
        --out results/value-gsm8k/step_confidence

1. Reading (needs the target; resumable: OUT.jsonl gains a row per state, problem by problem). For
   the first `--problems` training problems of the pool (by line number), one forward of the target
   over the chain-of-thought prompt and each chain gives every reply token's log-probability, the
   top token's probability and the entropy (temperature 1). A chain's states are its prefixes
   ending at a line break before its end (the steps a tree over lines would rate). Per state: the
   mean log-probability of the prefix, of its last step, the least likely token of the last step,
   the weakest step so far, the last step's mean top-1 probability and negative entropy.
2. Measuring (no model; `--no-read` re-derives from OUT.jsonl): each feature's step AUROC within a
   problem (right against wrong states, labelled by whether the chain's answer is right, as the
   judge's step AUROC is), and that of logistic heads on all features, fit out of fold (folds grouped
   by problem). Writes OUT.md with the table and whether the best reaches GATE.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import click
import torch

from seed_tot.analysis.token_confidence import read_each_problem, token_confidence

ROOT = Path(__file__).resolve().parent.parent
GATE = 0.75
DIGITS = 5  # what the stored rows keep of each feature  # the step AUROC a signal must reach before a tree search is spent on it
FEATURES = ("prefix_mean_logprob", "step_mean_logprob", "step_min_logprob", "weakest_step_logprob",
            "step_mean_top1", "step_neg_entropy")


def step_ends(text: str, offsets: list[tuple[int, int]]) -> list[int]:
    """Token counts at which the chain's lines before its last end (a token ending at or before a
    line break's position belongs to the prefix); empty steps are skipped."""
    breaks, previous = [], -1
    for i, char in enumerate(text):
        if char == "\n":
            if text[previous + 1 : i].strip():
                breaks.append(i)
            previous = i
    ends, last = [], 0
    for position in breaks:
        count = sum(1 for start, _ in offsets if start < position)
        if last < count < len(offsets):
            ends.append(count)
            last = count
    return ends


def state_features(logprob: torch.Tensor, top1: torch.Tensor, entropy: torch.Tensor, ends: list[int]) -> list[dict]:
    """The features of each state ending at token count `ends[k]`."""
    rows, start, step_means = [], 0, []
    for end in ends:
        step = slice(start, end)
        step_means.append(float(logprob[step].mean()))
        found = {"prefix_mean_logprob": float(logprob[:end].mean()), "step_mean_logprob": step_means[-1],
                 "step_min_logprob": float(logprob[step].min()), "weakest_step_logprob": min(step_means),
                 "step_mean_top1": float(top1[step].mean()), "step_neg_entropy": float(-entropy[step].mean())}
        rows.append({name: round(value, DIGITS) for name, value in found.items()})
        start = end
    return rows


def read_states(target, items, out: Path) -> None:
    """Append each chain's state rows to OUT.jsonl, skipping problems it already holds."""

    def rows_of(item, prompt: list[int]) -> list[dict]:
        rows = []
        for chain in item.chains:
            encoded = target.tokenizer(chain.text, add_special_tokens=False, return_offsets_mapping=True)
            ends = step_ends(chain.text, encoded["offset_mapping"])
            if ends:
                confidence = token_confidence(target, prompt, encoded["input_ids"])
                rows += [{"problem_id": item.problem_id, "chain_index": chain.index, "step": step,
                          "correct": chain.correct, **features}
                         for step, features in enumerate(state_features(*confidence, ends), 1)]
        return rows

    read_each_problem(target, items, out, rows_of)


def read_rows(path: Path) -> list[dict]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as handle:
        return [json.loads(line) for line in handle]


def measure(rows: list[dict], l2s: tuple[float, ...] = (0.01, 0.1, 1.0)) -> list[tuple[str, float]]:
    """(what scores the states, step AUROC within a problem) for each feature and the out-of-fold heads."""
    from seed_tot.analysis.judge_cv import out_of_fold_logits
    from seed_tot.training.value.fit import within_problem_auroc

    labels = torch.tensor([r["correct"] for r in rows])
    problems = [r["problem_id"] for r in rows]
    x = torch.tensor([[r[name] for name in FEATURES] for r in rows])

    def within(scores: torch.Tensor) -> float:
        return round(within_problem_auroc(scores.tolist(), labels.tolist(), problems)[0], 4)

    found = [(name, within(x[:, i])) for i, name in enumerate(FEATURES)]
    found += [(f"logistic on all six, L2 {l2} (out of fold)", within(out_of_fold_logits(x, labels, problems, l2)))
              for l2 in l2s]
    return found


def report(rows: list[dict], found: list[tuple[str, float]], command: str) -> str:
    best_name, best = max(found, key=lambda item: item[1])
    verdict = "passes" if best >= GATE else "fails"
    chains = len({(r["problem_id"], r["chain_index"]) for r in rows})
    lines = [f"# Token confidence as a step signal ({len({r['problem_id'] for r in rows})} training problems, "
             f"{chains} chains, {len(rows)} states)", "", f"Command: `{command}`", "",
             "| scores the states | step AUROC within a problem |", "|---|---|"]
    lines += [f"| {name} | {value:.4f} |" for name, value in found]
    lines += ["", f"The best, {best_name}, reaches {best:.4f}: it {verdict} the gate of {GATE} a process signal "
              "must reach before a tree search is steered by it."]
    return "\n".join(lines) + "\n"


@click.command(help=__doc__)
@click.option("--pool", type=click.Path(exists=True, file_okay=False, path_type=Path), required=True)
@click.option("--problems", default=60, show_default=True)
@click.option("--target", default="default-target", show_default=True)
@click.option("--dtype", default="auto", show_default=True)
@click.option("--no-read", is_flag=True, help="Only measure the rows OUT.jsonl (or OUT.jsonl.gz) holds (no model).")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), required=True, help="Path without suffix.")
def main(pool, problems, target, dtype, no_read, out):
    from seed_tot.training.value.store import chains_of_pool
    from seed_tot_tasks import get_task

    rows_path = out.with_suffix(".jsonl")
    out.parent.mkdir(parents=True, exist_ok=True)
    if not no_read:
        from seed_tot.models.loading import load_model

        model = load_model(target, dtype=dtype)
        items = sorted(chains_of_pool(pool, get_task), key=lambda item: int(item.problem_id.rsplit("-", 1)[1]))
        read_states(model, items[:problems], rows_path)
    if not rows_path.is_file():
        rows_path = out.with_suffix(".jsonl.gz")
    rows = read_rows(rows_path)
    command = (f"python scripts/step_confidence_auroc.py --pool {pool} --problems {problems} --dtype {dtype} "
               f"--out {out}")
    text = report(rows, measure(rows), command)
    out.with_suffix(".md").write_text(text)
    click.echo(text)


if __name__ == "__main__":
    main()
