"""A judged vote that samples more chains only where the judge is unsure, simulated on stored pools.

Round 1 is GSM8K's default: the greedy chain and the first round's samples, each chain voting with
the learned judge's value. While the winning answer's share of the summed values is below the
threshold (seed_tot/search/escalation.py, the rule `--escalate` runs), the next round's samples are
drawn and the vote is taken again over every chain. The threshold is chosen on training problems
only, whose chains are valued out of fold (grouped folds; the head's layer, L2 and scope): the
smallest threshold of the grid whose expected accuracy is within `--tolerance` points of always
drawing every round. Then each held-out pool (POOL:SAMPLES) is simulated with it and compared with
the plain vote of 8 samples (exact mean over 8-subsets), with a paired bootstrap over problems.
Expectations are over `--orders` random orders of each problem's samples (seeded per problem);
tokens are the chains' own new tokens, the greedy chain's included. No model is loaded: VALUES_DIR
holds the judge's stored values (scripts/judge_values.py: out of fold for the training pool, the
head's own for the held-out pools).

    python scripts/judged_escalation.py results/value-gsm8k/judge-values --pool results/value-gsm8k/train-pool \
        --heldout results/heldout-gsm8k-43-100/cot-pool:16 --heldout results/heldout-gsm8k-101-160/cot-pool:8 \
        --out results/value-gsm8k/escalation
"""

from __future__ import annotations

import random
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import click

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # `python scripts/judged_escalation.py` from anywhere: the package and tasks/
    sys.path.insert(0, str(ROOT))

from seed_tot.search.escalation import needs_more_chains  # noqa: E402
from seed_tot.analysis.report_files import write_report  # noqa: E402

Chain = tuple[str | None, float | None, int]  # (answer, value, new tokens); answer None: cut off or rejected
GRID = tuple(round(0.5 + 0.05 * i, 2) for i in range(11))  # 0.50 ... 1.00


@dataclass
class RatedProblem:
    greedy: Chain | None
    samples: list[Chain]
    correct: set[str]


def judged_vote(greedy: Chain | None, samples: list[Chain], correct: set[str]) -> tuple[dict[str, float], float]:
    """The value-weighted vote's totals and its expected credit (ties go to the greedy chain's answer,
    else are split evenly), as seed_tot/search/answers.py answers."""
    votes: dict[str, float] = defaultdict(float)
    for answer, value, _ in ([greedy] if greedy else []) + samples:
        if answer is not None and value is not None:
            votes[answer] += value
    if not votes:
        return votes, 0.0
    top = max(votes.values())
    tied = [answer for answer, total in votes.items() if abs(total - top) < 1e-9]
    if greedy is not None and greedy[0] in tied:
        return votes, float(greedy[0] in correct)
    return votes, sum(answer in correct for answer in tied) / len(tied)


def escalate(problem: RatedProblem, order: list[int], rounds: tuple[int, ...], threshold: float) -> tuple[float, int, int]:
    """(credit, new tokens, rounds run) of the escalating vote with the samples taken in `order`."""
    used = 0
    for run, size in enumerate(rounds, 1):
        used += size
        chains = [problem.samples[i] for i in order[:used]]
        votes, credit = judged_vote(problem.greedy, chains, problem.correct)
        if run == len(rounds) or not needs_more_chains(votes, threshold):
            break
    tokens = (problem.greedy[2] if problem.greedy else 0) + sum(chain[2] for chain in chains)
    return credit, tokens, run


def orders(problem_id: str, samples: int, count: int, seed: int) -> list[list[int]]:
    draw = random.Random(f"{seed}:{problem_id}")
    return [draw.sample(range(samples), samples) for _ in range(count)]


def expected(problems: dict[str, RatedProblem], rounds: tuple[int, ...], threshold: float, count: int,
             seed: int) -> dict[str, list[float]]:
    """Per problem (sorted ids): expected credit, tokens and rounds over `count` orders of all the
    problem's samples (a pool of 16 samples draws a two-round vote's 8 from all 16, as the plain
    vote it is compared with is averaged over every 8-subset of them)."""
    found = {"credit": [], "tokens": [], "rounds": []}
    for pid in sorted(problems):
        runs = [escalate(problems[pid], order, rounds, threshold)
                for order in orders(pid, len(problems[pid].samples), count, seed)]
        for name, column in zip(("credit", "tokens", "rounds"), zip(*runs, strict=True), strict=True):
            found[name].append(sum(column) / len(column))
    return found


def choose_threshold(problems: dict[str, RatedProblem], rounds: tuple[int, ...], tolerance: float, count: int,
                     seed: int) -> tuple[float, list[dict]]:
    """The smallest grid threshold within `tolerance` (a fraction of problems) of always escalating."""
    always = sum(expected(problems, rounds, 2.0, count, seed)["credit"])
    rows = []
    for threshold in GRID:
        got = expected(problems, rounds, threshold, count, seed)
        rows.append({"threshold": threshold, "correct": round(sum(got["credit"]), 2),
                     "tokens": round(sum(got["tokens"]) / len(problems), 1),
                     "mean_rounds": round(sum(got["rounds"]) / len(problems), 3)})
    tolerated = always - tolerance * len(problems)
    chosen = next(row["threshold"] for row in rows if row["correct"] >= tolerated - 1e-9)
    return chosen, [{"always_all_rounds": round(always, 2), "problems": len(problems)}] + rows


def plain_vote(problems: dict[str, RatedProblem], k: int) -> tuple[list[float], float]:
    """Per problem the plain vote of k samples (exact mean over k-subsets), and its mean tokens."""
    from seed_tot.observe.paired_stats import expected_vote_accuracy

    ids = sorted(problems)
    credit = [expected_vote_accuracy([c[0] for c in problems[pid].samples], problems[pid].correct, k) for pid in ids]
    tokens = sum(k * sum(c[2] for c in problems[pid].samples) / len(problems[pid].samples) for pid in ids) / len(ids)
    return credit, tokens


def rated_problems(pool: Path, values: dict[tuple[str, int], float], samples: int | None) -> dict[str, RatedProblem]:
    """The pool's problems whose chains all have values: greedy (index 0) and samples 1..`samples`."""
    from seed_tot.observe.comparison import bundled_loader
    from seed_tot.observe.comparison.pools import chain_answer, pool_problems
    from seed_tot_tasks import get_task

    found = {}
    for pid, p in pool_problems(pool, get_task, bundled_loader()).items():
        results = p.samples[:samples] if samples else p.samples
        if p.greedy is None or (pid, 0) not in values or (samples and len(results) < samples):
            continue

        def chain(result, index):
            answer = chain_answer(p.task, p.problem, result, index)
            return answer, values.get((pid, index)) if answer is not None else None, result.stats.new_tokens

        greedy = chain(p.greedy, 0)
        chains = [chain(result, i) for i, result in enumerate(results, 1)]
        correct = {c[0] for c in [greedy] + chains if c[0] is not None and p.task.score(p.problem, c[0]) == 1.0}
        found[pid] = RatedProblem(greedy, chains, correct)
    return found


def compare(problems: dict[str, RatedProblem], rounds: tuple[int, ...], threshold: float, count: int, seed: int,
            resamples: int) -> list[dict]:
    """Rows for the escalating vote with 1..len(rounds) rounds, always all of them, and the plain vote of 8."""
    from seed_tot.observe.paired_stats import paired_bootstrap

    vote8, vote8_tokens = plain_vote(problems, 8)
    n = len(problems)
    rows = [{"rule": "plain vote of 8 samples", "correct": round(sum(vote8), 2), "problems": n,
             "tokens": round(vote8_tokens, 1)}]
    for last in range(1, len(rounds) + 1):
        for name, tau in ((f"escalating vote, up to {last} round(s)", threshold), (f"always {last} round(s)", 2.0)):
            if last == 1 and tau == 2.0:
                continue  # one round is the same with any threshold
            got = expected(problems, rounds[:last], tau, count, seed)
            low, high = paired_bootstrap([a - b for a, b in zip(got["credit"], vote8, strict=True)], resamples=resamples)
            rows.append({"rule": name, "chains": 1 + sum(rounds[:last]), "correct": round(sum(got["credit"]), 2),
                         "problems": n, "tokens": round(sum(got["tokens"]) / n, 1),
                         "mean_rounds": round(sum(got["rounds"]) / n, 3),
                         "minus_vote_of_8": round((sum(got["credit"]) - sum(vote8)) / n, 4),
                         "ci95": [round(low, 4), round(high, 4)]})
    return rows


def heldout_values(values_dir: Path, specs: list[str]) -> dict[str, tuple[dict, int]]:
    """{POOL:SAMPLES: (the judge's chain values, samples)} from the values scripts/judge_values.py stored;
    refused where a pool holds a problem the values' training rows name."""
    from seed_tot.analysis.judge_values import chain_values, read_value_rows, values_path

    trained = {row["problem_id"] for path in values_dir.glob("*.jsonl.gz") for row in read_value_rows(path)
               if row["out_of_fold"]}
    found = {}
    for spec in specs:
        pool, samples = spec.rsplit(":", 1)
        rows = read_value_rows(values_path(values_dir, Path(pool)))
        leaked = trained & {row["problem_id"] for row in rows}
        if leaked:
            raise click.ClickException(f"{pool} holds problems the head was trained on ({min(leaked)}): "
                                       "measure on held-out problems.")
        found[spec] = (chain_values(rows, int(samples)), int(samples))
    return found


def training_values(values_dir: Path, pool: Path) -> dict[tuple[str, int], float]:
    """Every training chain's out-of-fold value (a head with the judge's settings fit on the other folds)."""
    from seed_tot.analysis.judge_values import chain_values, read_value_rows, values_path

    return chain_values([row for row in read_value_rows(values_path(values_dir, pool)) if row["out_of_fold"]])


def rounds_within(rounds: tuple[int, ...], samples: int) -> tuple[int, ...]:
    """The leading rounds whose samples a pool of `samples` per problem holds."""
    return tuple(size for i, size in enumerate(rounds) if sum(rounds[:i + 1]) <= samples)


def row_line(row: dict) -> str:
    difference = (f"{row['minus_vote_of_8']:+.1%} [{row['ci95'][0]:+.1%}, {row['ci95'][1]:+.1%}]"
                  if "ci95" in row else "")
    return (f"| {row['rule']} | {row.get('chains', 8)} | {row['correct']:.2f}/{row['problems']} | {row['tokens']:,.0f} "
            f"| {row.get('mean_rounds', '')} | {difference} |")


@click.command()
@click.argument("values_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--pool", type=click.Path(exists=True, file_okay=False, path_type=Path), required=True,
              help="The training rollouts (greedy + samples per problem) the head was fit on.")
@click.option("--heldout", multiple=True, help="POOL:SAMPLES, repeatable (test problems, never trained on).")
@click.option("--rounds", default="4,4,8", show_default=True, help="Samples drawn in each round.")
@click.option("--tolerance", type=float, default=0.005, show_default=True,
              help="How far below always escalating (fraction of problems) the chosen threshold may be.")
@click.option("--orders", "count", type=int, default=200, show_default=True, help="Random sample orders per problem.")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--resamples", type=int, default=10_000, show_default=True)
@click.option("--out", type=click.Path(path_type=Path), required=True, help="Writes OUT.md and OUT.json.")
def main(values_dir, pool, heldout, rounds, tolerance, count, seed, resamples, out):
    found, lines = study(values_dir, pool, list(heldout), tuple(int(r) for r in rounds.split(",")), tolerance, count,
                         seed, resamples, command=" ".join(sys.argv))
    write_report(out, found, "\n".join(lines), indent=1)


def study(values_dir: Path, pool: Path, heldout: list[str], rounds: tuple[int, ...], tolerance: float, count: int,
          seed: int, resamples: int, command: str = "") -> tuple[dict, list[str]]:
    """(the report's record, its markdown lines): the threshold chosen on the training pool's
    out-of-fold values, then each held-out pool simulated with it."""
    train_samples = 8
    train = rated_problems(pool, training_values(values_dir, pool), train_samples)
    train_rounds = rounds_within(rounds, train_samples)
    threshold, grid = choose_threshold(train, train_rounds, tolerance, count, seed)
    found = {"command": command, "values": str(values_dir), "rounds": rounds, "training_rounds": train_rounds,
             "tolerance": tolerance, "orders": count, "seed": seed, "threshold": threshold, "training_grid": grid,
             "heldout": {}}
    lines = ["# A judged vote that samples more where the judge is unsure", "", f"Command: `python {command}`",
             "", f"Training problems ({len(train)}, values out of fold, rounds {train_rounds}): always every round "
             f"{grid[0]['always_all_rounds']:.2f}/{len(train)}; threshold chosen **{threshold}**.", "",
             "| threshold | expected correct | new tokens per problem | mean rounds |", "|---|---|---|---|"]
    lines += [f"| {r['threshold']} | {r['correct']:.2f}/{len(train)} | {r['tokens']:,.0f} | {r['mean_rounds']} |"
              for r in grid[1:]]
    for spec, (values, samples) in heldout_values(values_dir, heldout).items():
        problems = rated_problems(Path(spec.rsplit(":", 1)[0]), values, samples)
        rows = compare(problems, rounds_within(rounds, samples), threshold, count, seed, resamples)
        found["heldout"][spec] = rows
        lines += ["", f"## {spec} ({len(problems)} problems)", "",
                  "| rule | chains at most | expected correct | new tokens per problem | mean rounds "
                  "| - plain vote of 8 (95% paired bootstrap) |", "|---|---|---|---|---|---|"]
        lines += [row_line(row) for row in rows]
    return found, lines


if __name__ == "__main__":
    main()
