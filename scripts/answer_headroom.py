"""What a better judge could get out of a finished run's candidates: for each problem, whether a
correct answer was among the tree's answer leaves, or among the leaves and the chains of thought,
against what the run answered. The gap between "a correct candidate exists" and the final answer
is what a perfect selector (evaluator or vote) would add; a tree whose leaves rarely hold the
gold needs a better evaluator during the search, not a better vote at the end.

    python scripts/answer_headroom.py results/quality-gsm8k [RUN ...]

Candidates are the nodes that take part in the vote (seed_tot.search.answers.vote_candidates:
rejected and cut-off nodes do not count) stored in the trace: the greedy chain and --cot-samples
chains count, chains added afterwards (cot_samples.jsonl) do not, though the final answer
(seed-tot report's) votes with them. Problems are scored by their own trace's gold.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import click

from seed_tot.errors import SeedTotError
from seed_tot.observe.comparison.runs import problem_of, read_jsonl, report_run, trace_of
from seed_tot.observe.trace import tree_from_trace
from seed_tot.search.answers import is_chain_of_thought, vote_candidates
from seed_tot.task import Problem, Task
from seed_tot.tree import ReasoningTree
from seed_tot_tasks import get_task


@dataclass
class Headroom:
    problems: int = 0
    final: int = 0  # the run's final answer (re-derived) is correct
    leaf_holds_gold: int = 0  # some voting answer leaf of the tree is correct
    candidate_holds_gold: int = 0  # some voting leaf or chain of thought is correct
    correct_leaf_share: float = 0.0  # mean share of correct leaves, over problems with voting leaves


def candidate_correctness(task: Task, problem: Problem, tree: ReasoningTree) -> tuple[list[bool], list[bool]]:
    """(correct? per voting tree leaf, correct? per voting chain of thought)."""
    leaves, chains = [], []
    for answer, node in vote_candidates(task, problem, tree):
        (chains if is_chain_of_thought(node) else leaves).append(task.score(problem, answer) == 1.0)
    return leaves, chains


def headroom(outcomes: list[tuple[bool, list[bool], list[bool]]]) -> Headroom:
    """Totals over problems, each (final correct, leaves' correctness, chains' correctness)."""
    found = Headroom(problems=len(outcomes))
    shares = []
    for final, leaves, chains in outcomes:
        found.final += final
        found.leaf_holds_gold += any(leaves)
        found.candidate_holds_gold += any(leaves) or any(chains)
        if leaves:
            shares.append(sum(leaves) / len(leaves))
    found.correct_leaf_share = sum(shares) / len(shares) if shares else 0.0
    return found


def run_outcomes(run: Path, task_of=get_task) -> list[tuple[bool, list[bool], list[bool]]]:
    final = {report.problem.id: report.correct["final"] for report in report_run(run, task_of)}
    outcomes = []
    for row in read_jsonl(run / "results.jsonl"):
        trace = trace_of(run, row)
        task = task_of(trace.task)
        problem = problem_of(trace, {p.id: p for p in task.load()})
        outcomes.append((final[problem.id], *candidate_correctness(task, problem, tree_from_trace(trace))))
    return outcomes


@click.command(help=__doc__.split("\n\n")[0])
@click.argument("runs", nargs=-1, required=True, type=click.Path(path_type=Path))
def main(runs: tuple[Path, ...]) -> None:
    print("| run | problems | final correct | a tree leaf is correct | a leaf or chain is correct "
          "| mean share of correct leaves |")
    print("|---|---|---|---|---|---|")
    try:
        for run in runs:
            h = headroom(run_outcomes(run))
            print(f"| {run} | {h.problems} | {h.final} | {h.leaf_holds_gold} | {h.candidate_holds_gold} "
                  f"| {h.correct_leaf_share:.2f} |")
    except SeedTotError as error:
        sys.exit(str(error))


if __name__ == "__main__":
    main()
