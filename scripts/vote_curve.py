"""Accuracy against tokens per problem on the stored GSM8K held-out pools: the plain vote at K = 1..16
chains, and the points the stored reports give for the judged default (one round / two rounds).

No model is loaded. Each pool's chains (cot_samples.jsonl: a greedy chain and 8 or 16 samples per
problem) are read the way the vote reads them (seed_tot/observe/comparison/pools.py): a chain cut
off by its token budget, one whose answer does not parse and one whose written arithmetic the task
shows wrong do not vote. Two plain votes, both exact expectations over the order the samples are
drawn in (every K-subset of a problem's samples counted, analysis/vote_counts.py):

- "plain vote of K samples": K sampled chains, ties split evenly (the rule of the stored comparisons'
  "plain vote of 8 samples", which this reproduces); tokens: K times the problem's mean sample length;
- "greedy chain + K-1 samples": what `seed-tot gsm8k --vote-weight leaf --cot-samples K-1` votes
  (the greedy chain always votes where it answered, and a tie its answer is in goes to it); tokens:
  the greedy chain's plus K-1 mean samples.

Tokens are the chains' new tokens only (no prompt). Two adaptive votes draw greedy + 4 samples and
then 2 more at a time until the winner holds a share of the votes (plain) or of the summed judge
values (judged: the packaged judge's stored value of each chain, results/value-gsm8k/judge-values)
at each threshold, up to 8 or 16 samples (seed_tot/analysis/adaptive_vote.py). The judged default's
two points are those of scripts/judged_escalation.py's reports: "escalating vote, up to 1 round(s)"
(greedy + 4 judged samples) and "up to 2 round(s)" (4 more where unsure: the GSM8K default), each
over 200 random orders of the samples.

    python scripts/vote_curve.py --out results/vote-curve
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # `python scripts/vote_curve.py` from anywhere: the package and tasks/
    sys.path.insert(0, str(ROOT))

from seed_tot.analysis.adaptive_vote import Pool, expected  # noqa: E402
from seed_tot.analysis.vote_counts import counted_vote_accuracy  # noqa: E402

POOLS = ("results/heldout-gsm8k-43-100/cot-pool", "results/heldout-gsm8k-101-160/cot-pool",
         "results/heldout-gsm8k-161-220/cot-pool")
VALUES = "results/value-gsm8k/judge-values"
REPORTS = ("results/value-gsm8k/escalation_266_problems.json", "results/value-gsm8k/escalation_266_problems_161_220.json")
JUDGED_RULES = {"escalating vote, up to 1 round(s)": "judged, one round (greedy + 4 samples)",
                "escalating vote, up to 2 round(s)": "judged, two rounds (the default: 4 more where unsure)"}
MAX_K = 16
THRESHOLDS = (0.6, 0.7, 0.8, 0.9, 1.0)  # the adaptive vote's winner share at which it stops sampling
CAPS = (8, 16)  # ... and the most samples it draws
ORDERS = 200


def chains(pool: Path) -> list[dict]:
    """Per problem (sorted ids): the greedy chain's vote and tokens, each sample's vote and tokens,
    and the answers that are right, by the vote's own rule for a chain."""
    from seed_tot.analysis.judge_values import chain_values, read_value_rows, values_path
    from seed_tot.observe.comparison.folders import bundled_loader
    from seed_tot.observe.comparison.pools import chain_answer, pool_problems
    from seed_tot_tasks import get_task

    found = []
    problems = pool_problems(pool, get_task, bundled_loader())
    values = chain_values(read_value_rows(values_path(ROOT / VALUES, pool)))
    for pid in sorted(problems):
        p = problems[pid]
        if p.greedy is None:
            raise click.ClickException(f"{pool}: problem {pid} has no greedy chain")
        samples = [chain_answer(p.task, p.problem, r, i) for i, r in enumerate(p.samples, 1)]
        greedy = chain_answer(p.task, p.problem, p.greedy, 0)
        right = {a for a in [greedy, *samples] if a is not None and p.task.score(p.problem, a) == 1.0}
        found.append({"id": pid, "greedy": greedy, "greedy_tokens": p.greedy.stats.new_tokens, "samples": samples,
                      "sample_tokens": [r.stats.new_tokens for r in p.samples], "correct": right,
                      "greedy_value": values.get((pid, 0)) if greedy is not None else None,
                      "sample_values": [values.get((pid, i)) if a is not None else None
                                        for i, a in enumerate(samples, 1)]})
    return found


def point(k: int, correct: float, tokens: float, problems: int) -> dict:
    return {"k": k, "correct": round(correct, 4), "accuracy": round(correct / problems, 4), "tokens": round(tokens, 1)}


def curves(problems: list[dict], max_k: int = MAX_K) -> dict[str, list[dict]]:
    """The two plain votes at every K the pool allows (up to max_k), summed over its problems."""
    n = len(problems)
    samples = min(len(p["samples"]) for p in problems)
    mean = [sum(p["sample_tokens"][:samples]) / samples for p in problems]
    plain, greedy = [], []
    for k in range(1, min(samples, max_k) + 1):
        correct = sum(counted_vote_accuracy(p["samples"][:samples], p["correct"], k) for p in problems)
        plain.append(point(k, correct, sum(k * m for m in mean) / n, n))
    for k in range(1, min(samples + 1, max_k) + 1):
        correct = sum(counted_vote_accuracy(p["samples"][:samples], p["correct"], k - 1, fixed=p["greedy"])
                      if p["greedy"] is not None else
                      (counted_vote_accuracy(p["samples"][:samples], p["correct"], k - 1) if k > 1 else 0.0)
                      for p in problems)
        tokens = sum(p["greedy_tokens"] + (k - 1) * m for p, m in zip(problems, mean, strict=True)) / n
        greedy.append(point(k, correct, tokens, n))
    return {"plain": plain, "with_greedy": greedy}


def adaptive(problems: list[dict]) -> list[dict]:
    """The votes that sample in rounds until sure (seed_tot/analysis/adaptive_vote.py): greedy + 4
    samples, then 2 more at a time while the winner holds less than the threshold, up to each cap the
    pool allows, plain and judged; and the plain vote's one second round of 4 where the winner holds
    < 0.7 (`--vote-weight leaf --escalate 4`). Summed over the problems, each averaged over ORDERS orders."""
    import zlib

    n = len(problems)
    pools = [(zlib.crc32(p["id"].encode()), Pool(p["greedy"], p["greedy_tokens"], p["samples"], p["sample_tokens"],
                                                  frozenset(p["correct"]), p["greedy_value"], p["sample_values"]))
             for p in problems]
    samples = min(len(p["samples"]) for p in problems)
    rules = [(f"{kind}, rounds of 2 until sure", 2, cap, threshold) for kind in ("plain", "judged")
             for cap in CAPS if cap <= samples for threshold in THRESHOLDS] + [("plain, 4 more where unsure", 4, 8, 0.7)]
    rows = []
    for rule, step, cap, threshold in rules:
        judged_rule = rule.startswith("judged")
        runs = [expected(pool, 4, step, cap, threshold, ORDERS, seed, judged_rule) for seed, pool in pools]
        rows.append({"rule": rule, "step": step, "cap": cap, "threshold": threshold,
                     "correct": round(sum(r[0] for r in runs), 4), "accuracy": round(sum(r[0] for r in runs) / n, 4),
                     "tokens": round(sum(r[1] for r in runs) / n, 1),
                     "samples_drawn": round(sum(r[2] for r in runs) / n, 2), "problems": n})
    return rows


def judged(pool: str, reports: list[tuple[str, dict]]) -> list[dict]:
    """The judged default's points for `pool` from the stored escalation reports."""
    found = []
    for path, report in reports:
        for key, rows in report["heldout"].items():
            if key.split(":")[0] != pool:
                continue
            for row in rows:
                if row["rule"] in JUDGED_RULES:
                    found.append({"rule": JUDGED_RULES[row["rule"]], "chains": row["chains"], "correct": row["correct"],
                                  "accuracy": round(row["correct"] / row["problems"], 4), "tokens": row["tokens"],
                                  "problems": row["problems"], "mean_rounds": row["mean_rounds"], "source": path})
    return found


def pooled(blocks: list[dict]) -> dict:
    """Every pool's problems together, at the K (and the judged rules) every pool has."""
    n = sum(b["problems"] for b in blocks)
    found = {"pool": "all", "problems": n}
    for name in ("plain", "with_greedy"):
        ks = sorted(set.intersection(*({p["k"] for p in b[name]} for b in blocks)))
        rows = []
        for k in ks:
            at = [next(p for p in b[name] if p["k"] == k) for b in blocks]
            rows.append(point(k, sum(p["correct"] for p in at),
                              sum(p["tokens"] * b["problems"] for p, b in zip(at, blocks, strict=True)) / n, n))
        found[name] = rows
    keys = [(r["rule"], r["cap"], r["threshold"]) for r in blocks[0]["adaptive"]
            if all(any((x["rule"], x["cap"], x["threshold"]) == (r["rule"], r["cap"], r["threshold"]) for x in b["adaptive"])
                   for b in blocks)]
    found["adaptive"] = []
    for key in keys:
        at = [next(x for x in b["adaptive"] if (x["rule"], x["cap"], x["threshold"]) == key) for b in blocks]
        correct = sum(x["correct"] for x in at)
        found["adaptive"].append({**{k: at[0][k] for k in ("rule", "step", "cap", "threshold")},
                                  "correct": round(correct, 4), "accuracy": round(correct / n, 4),
                                  "tokens": round(sum(x["tokens"] * x["problems"] for x in at) / n, 1),
                                  "samples_drawn": round(sum(x["samples_drawn"] * x["problems"] for x in at) / n, 2),
                                  "problems": n})
    rules = [r["rule"] for r in blocks[0]["judged"] if all(any(x["rule"] == r["rule"] for x in b["judged"]) for b in blocks)]
    found["judged"] = []
    for rule in rules:
        at = [next(x for x in b["judged"] if x["rule"] == rule) for b in blocks]
        correct = sum(x["correct"] for x in at)
        found["judged"].append({"rule": rule, "chains": at[0]["chains"], "correct": round(correct, 2),
                                "accuracy": round(correct / n, 4), "problems": n,
                                "tokens": round(sum(x["tokens"] * x["problems"] for x in at) / n, 1)})
    return found


def build(pools: tuple[str, ...] = POOLS, report_paths: tuple[str, ...] = REPORTS, max_k: int = MAX_K) -> dict:
    reports = [(path, json.loads((ROOT / path).read_text())) for path in report_paths]
    blocks = []
    for pool in pools:
        problems = chains(ROOT / pool)
        blocks.append({"pool": pool, "problems": len(problems), "samples": min(len(p["samples"]) for p in problems),
                       **curves(problems, max_k), "adaptive": adaptive(problems),
                       "judged": judged(pool, reports)})
    return {"pools": blocks, "all": pooled(blocks)}


LABELS = {"results/heldout-gsm8k-43-100/cot-pool": "held-out 43-100 (58 problems, 16 samples)",
          "results/heldout-gsm8k-101-160/cot-pool": "held-out 101-160 (60 problems, 8 samples)",
          "results/heldout-gsm8k-161-220/cot-pool": "fresh 161-220 (60 problems, 8 samples)",
          "all": "all three (178 problems; K as far as every pool has chains)"}


def plot(curve: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    blocks = [*curve["pools"], curve["all"]]
    figure, axes = plt.subplots(2, 2, figsize=(11, 8.5), sharey=True)
    for ax, block in zip(axes.flat, blocks, strict=True):
        for name, style, label in (("plain", "-o", "plain vote of K samples"),
                                   ("with_greedy", "--s", "plain vote, greedy chain + K-1 samples")):
            rows = block[name]
            ax.plot([r["tokens"] for r in rows], [100 * r["accuracy"] for r in rows], style, markersize=4, label=label)
            for r in rows:
                if name == "plain" and r["k"] in (1, 2, 4, 8, 16):
                    ax.annotate(f"K={r['k']}", (r["tokens"], 100 * r["accuracy"]), textcoords="offset points",
                                xytext=(0, -13), ha="center", fontsize=8)
        for kind, style in (("plain", ":^"), ("judged", "-.v")):
            sure = [r for r in block["adaptive"] if r["rule"].startswith(f"{kind}, rounds") and r["cap"] == 8]
            ax.plot([r["tokens"] for r in sure], [100 * r["accuracy"] for r in sure], style, markersize=5,
                    label=f"{kind} vote, rounds of 2 until the winner holds 0.6 .. 1.0 (at most 8 samples)")
            for r in sure:
                if r["threshold"] in (0.6, 1.0):
                    ax.annotate(f"{r['threshold']:g}", (r["tokens"], 100 * r["accuracy"]), textcoords="offset points",
                                xytext=(0, 6), ha="center", fontsize=7)
        for row, marker in zip(block["judged"], ("D", "*"), strict=False):
            ax.plot(row["tokens"], 100 * row["accuracy"], marker, markersize=12 if marker == "*" else 8,
                    color="tab:red" if marker == "*" else "tab:purple", label=row["rule"], linestyle="none")
        ax.set_title(LABELS.get(block["pool"], block["pool"]), fontsize=10)
        ax.set_xlabel("new tokens per problem")
        ax.grid(alpha=0.3)
    for ax in axes[:, 0]:
        ax.set_ylabel("accuracy (%)")
    axes.flat[0].legend(fontsize=8, loc="lower right")
    figure.suptitle("GSM8K, Qwen2.5-Coder-1.5B-Instruct: accuracy against tokens (expected over sample orders)",
                    fontsize=11)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


@click.command()
@click.option("--out", type=click.Path(file_okay=False), default="results/vote-curve", show_default=True)
@click.option("--no-plot", is_flag=True, help="Write curve.json only.")
def main(out: str, no_plot: bool) -> None:
    curve = {"command": "python scripts/vote_curve.py --out " + out, "pools_read": list(POOLS),
             "values_read": VALUES, "reports_read": list(REPORTS), **build()}
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "curve.json").write_text(json.dumps(curve, indent=1) + "\n")
    if not no_plot:
        plot(curve, folder / "curve.png")
    for block in [*curve["pools"], curve["all"]]:
        click.echo(f"{block['pool']} ({block['problems']} problems)")
        for name in ("plain", "with_greedy"):
            click.echo(f"  {name}: " + ", ".join(f"K={r['k']} {r['correct']:.2f} @ {r['tokens']:,.0f}" for r in block[name]))
        for row in block["adaptive"]:
            click.echo(f"  {row['rule']} (cap {row['cap']}, share {row['threshold']:g}): {row['correct']:.2f} @ "
                       f"{row['tokens']:,.0f} ({row['samples_drawn']:.2f} samples)")
        for row in block["judged"]:
            click.echo(f"  {row['rule']}: {row['correct']:.2f} @ {row['tokens']:,.0f}")


if __name__ == "__main__":
    main()
