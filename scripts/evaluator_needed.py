"""The evaluator quality that search would need: best-of-K reranking against self-consistency on the
same recorded chains, as a function of the evaluator's AUROC (seed_tot/analysis/evaluator_needed.py).

    python scripts/evaluator_needed.py FOLDER [FOLDER...] [--auroc 0.6 --auroc 0.8] [--draws 2000]

FOLDER: a pool of chains (scripts/add_cot_samples.py --task) or a run whose traces hold sampled
chains, as for `seed-tot report`; the folder with the most chains is used. Only sampled chains
count (the greedy chain is not a draw from the same distribution). Output: markdown.
"""

from __future__ import annotations

import random
from pathlib import Path

import click

from seed_tot.observe.comparison import SELF_CONSISTENCY_K, load_folders
from seed_tot.analysis.evaluator_needed import (
    break_even_auroc,
    draw_subsets,
    oracle_accuracy,
    rerank_accuracy,
)
from seed_tot.observe.paired_stats import expected_vote_accuracy
from seed_tot_tasks import get_task


def chain_labels(chains) -> list[bool | None]:
    return [None if answer is None else answer in chains.correct for answer in chains.answers]


def percent(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


@click.command()
@click.argument("folders", nargs=-1, required=True, type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--auroc", "aurocs", multiple=True, type=float, default=(0.6, 0.7, 0.8, 0.9), show_default=True,
              help="Evaluator AUROCs to show best-of-K accuracy at.")
@click.option("--draws", default=2000, show_default=True, help="K-subsets simulated per problem and K.")
@click.option("--seed", default=0, show_default=True)
def main(folders: tuple[Path, ...], aurocs: tuple[float, ...], draws: int, seed: int) -> None:
    _, chains, source = load_folders(list(folders), get_task)
    found = [c for _, c in chains.values() if c.answers]
    if not found:
        raise click.ClickException(f"{source} holds no sampled chains: run scripts/add_cot_samples.py first.")
    size = min(len(c.answers) for c in found)
    pools = [chain_labels(c)[:size] for c in found]
    rng = random.Random(seed)
    click.echo(f"Chains from {source}: {len(pools)} problems, {size} sampled chains each (at least); "
               f"{draws} simulated K-subsets per problem, seed {seed}. Evaluator model: equal-variance "
               "binormal (a correct chain's value ~ N(d, 1), a wrong one's ~ N(0, 1), AUROC = Phi(d/sqrt 2)).\n")
    header = ["K", "self-consistency", *(f"best-of-K, AUROC {a:g}" for a in aurocs), "perfect reranker",
              "AUROC best-of-K needs to match the vote"]
    click.echo("| " + " | ".join(header) + " |")
    click.echo("|" + "---|" * len(header))
    for k in (k for k in SELF_CONSISTENCY_K if k <= size):
        # the vote counts answers, so two wrong chains agree only when their answers are the same
        vote = sum(expected_vote_accuracy(c.answers[:size], c.correct, k) for c in found) / len(found)
        problems = [draw_subsets(labels, k, draws, rng) for labels in pools]
        oracle = sum(oracle_accuracy(labels, k) for labels in pools) / len(pools)
        needed = None if k == 1 else break_even_auroc(problems, vote)
        cells = [str(k), percent(vote), *(percent(rerank_accuracy(problems, a)) for a in aurocs), percent(oracle),
                 "one chain: the same answer" if k == 1 else "out of reach" if needed is None else f"{needed:.3f}"]
        click.echo("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
