"""The report as markdown: a run's answer rules (its table and one line per problem), and the
compute-matched comparison: greedy chain of thought, self-consistency at K = 1, 2, 4, 8, 16 chains
and every tree run, each with its accuracy and generated tokens per problem, on the problems all
given folders share, with paired tests."""

from __future__ import annotations

from pathlib import Path

from seed_tot.errors import SeedTotError
from seed_tot.observe.comparison.folders import TreeRun, load_folders, shared_ids
from seed_tot.observe.comparison.points import (
    BOOTSTRAP_RESAMPLES,
    OWN_CHAINS,
    Point,
    comparison_points,
    matched_k,
    own_chains_points,
    verdict,
)
from seed_tot.observe.comparison.pools import pool_dtypes
from seed_tot.observe.comparison.runs import ANSWER_RULES, CHAIN_RULES, ProblemReport
from seed_tot.observe.paired_stats import mcnemar_exact, paired_bootstrap

COLUMNS = {
    "final": "ToT final (vote over leaves and chains)",
    "cot": "greedy CoT alone",
    "cot_vote": "the chains' vote alone",
    "search": "search's own choice",
    "tree_vote": "tree vote without chains",
}
TOKENS_DEFINITION = (
    "tokens per problem = new tokens generated for the problem by every model call of the answer "
    "rule (tree thoughts, State Evaluator replies, greedy and sampled chains), averaged over the "
    "paired problems; prompt (prefill) tokens are not counted, so --value-mode logits evaluations "
    "count 0 and draft-model proposals are not counted."
)


CHAIN_COLUMNS = {"final": "final (the chains' vote)", "cot": "greedy CoT alone"}  # a run without a tree


def table(reports: list[ProblemReport], wall_per_problem: str) -> str:
    """One run's accuracy under each answer rule that applies to it (a run without a tree has no
    search choice and no tree vote)."""
    n = len(reports)
    has_tree = any(r.has_tree for r in reports)
    rules, columns = (ANSWER_RULES, COLUMNS) if has_tree else (CHAIN_RULES, CHAIN_COLUMNS)
    counts = {rule: sum(r.correct[rule] for r in reports) for rule in rules}
    tree_tokens = sum(r.tree_tokens for r in reports) / n
    sample_tokens = sum(r.sample_tokens for r in reports) / n
    tokens = f"{tree_tokens:.0f}" + (f" + {sample_tokens:.0f}" if sample_tokens else "")
    header = "| problems | " + " | ".join(columns[rule] for rule in rules)
    header += f" | tokens / problem ({'tree' if has_tree else 'chains'} + added chains) | run wall s / problem |"
    cells = " | ".join(f"{counts[rule]}/{n} ({counts[rule] / n:.0%})" for rule in rules)
    rule_line = "|---" * (len(rules) + 3) + "|"
    return f"{header}\n{rule_line}\n| {n} | {cells} | {tokens} | {wall_per_problem} |"


def problem_line(report: ProblemReport) -> str:
    answers = ", ".join(f"{rule} {report.answers[rule]}" for rule in report.rules)
    recorded = "" if report.recorded_answer == report.answers["final"] else f" (the run answered {report.recorded_answer})"
    return f"{report.problem.id}: gold {report.problem.gold} | {answers}{recorded}"


def own_chains_lines(pairs: list[tuple[Point, Point]]) -> list[str]:
    lines = []
    for final, chains in pairs:
        low, high = paired_bootstrap([a - b for a, b in zip(final.per_problem, chains.per_problem)],
                                     BOOTSTRAP_RESAMPLES)
        lines.append(f"- {final.label} vs {OWN_CHAINS} ({final.tokens:.0f} tokens vs {chains.tokens:.0f}): "
                     f"{100 * (final.accuracy - chains.accuracy):+.1f} points, 95% paired bootstrap "
                     f"[{100 * low:+.1f}, {100 * high:+.1f}]: {verdict(low, high)}")
    return lines


def between_runs_lines(trees: list[TreeRun], ids: list[str]) -> list[str]:
    """Every pair of runs with a tree, paired by problem: the search's own choice (the tree alone) and
    the final answer of the later folder against the earlier one."""
    runs = [tree for tree in trees if tree.has_tree]
    lines = []
    for index, earlier in enumerate(runs):
        for later in runs[index + 1:]:
            for rule in ("search", "final"):
                differences = [float(later.reports[pid].correct[rule]) - float(earlier.reports[pid].correct[rule])
                               for pid in ids]
                low, high = paired_bootstrap(differences, BOOTSTRAP_RESAMPLES)
                lines.append(f"- {COLUMNS[rule]}: run {later.label} vs run {earlier.label}: "
                             f"{100 * sum(differences) / len(ids):+.1f} points, 95% paired bootstrap "
                             f"[{100 * low:+.1f}, {100 * high:+.1f}]: {verdict(low, high, 'the first named')}")
    return lines


def rerank_lines(sc: list[tuple[int, Point]], rerank: list[tuple[int, Point]]) -> list[str]:
    lines = []
    for (k, vote), (_, best) in zip(sc, rerank):
        if k == 1:
            continue  # one chain: both rules answer with it
        low, high = paired_bootstrap([a - b for a, b in zip(best.per_problem, vote.per_problem)], BOOTSTRAP_RESAMPLES)
        lines.append(f"- best-of-K vs self-consistency at K={k} (the same chains and tokens): "
                     f"{100 * (best.accuracy - vote.accuracy):+.1f} points, 95% paired bootstrap "
                     f"[{100 * low:+.1f}, {100 * high:+.1f}]")
    return lines


def comparison_lines(greedy: Point | None, sc: list[tuple[int, Point]], trees: list[Point]) -> list[str]:
    lines = []
    for tree in trees:
        if greedy is not None:
            tree_only, cot_only, p = mcnemar_exact([x == 1 for x in tree.per_problem], [x == 1 for x in greedy.per_problem])
            lines.append(f"- {tree.label} vs greedy CoT: right only by the run {tree_only}, only by the CoT "
                         f"{cot_only}; McNemar exact p = {p:.3f}")
        if sc:
            k, point = matched_k(sc, tree.tokens)
            differences = [a - b for a, b in zip(tree.per_problem, point.per_problem, strict=True)]
            low, high = paired_bootstrap(differences, BOOTSTRAP_RESAMPLES)
            budget = "matched or more" if point.tokens >= tree.tokens else "fewer: the pool is too small to match"
            lines.append(f"- {tree.label} vs self-consistency K={k} ({point.tokens:.0f} tokens vs {tree.tokens:.0f}, "
                         f"{budget}): {100 * (tree.accuracy - point.accuracy):+.1f} points, 95% paired bootstrap "
                         f"[{100 * low:+.1f}, {100 * high:+.1f}] ({BOOTSTRAP_RESAMPLES:,} resamples of problems, "
                         f"seed 0): {verdict(low, high)}")
    return lines


def comparison_report(folders: list[Path], task_of) -> tuple[str, list[Point]]:
    """The comparison as markdown, and its points (for the plot)."""
    trees, chains, source = load_folders(folders, task_of)
    ids = shared_ids(trees, chains)
    if not ids:
        raise SeedTotError("The given folders share no problem id: pass runs of the same problems.")
    greedy, sc, rerank, tree_points = comparison_points(trees, chains, ids)
    points = ([greedy] if greedy is not None else []) + [p for _, p in sc] + [p for _, p in rerank] + tree_points
    n = len(ids)
    lines = [f"## Compute-matched comparison: {n} problems ({ids[0]} ... {ids[-1]}), paired by problem id", "",
             f"Chains of thought from {source}{pool_dtypes(source)}; {len(chains)} problems hold chains, each tree run holds "
             + ", ".join(f"{len(t.reports)}" for t in trees) + " (only the problems all folders share count).",
             TOKENS_DEFINITION, "Self-consistency: majority vote over the chains that answer; a chain cut off at its token "
             "budget, one whose answer does not parse, and one whose written work the task's check shows wrong "
             "(GSM8K: its arithmetic recomputed) do not vote; ties broken uniformly at random (expected credit), "
             "no vote = wrong.", "",
             "| answer | correct | accuracy | tokens / problem |", "|---|---|---|---|"]
    own = own_chains_points(trees, ids)
    table_rows = points + [chains for _, chains in own]
    for point in table_rows:
        correct = sum(point.per_problem)
        shown = f"{correct:.0f}" if correct == int(correct) else f"{correct:.2f}"
        lines.append(f"| {point.label} | {shown}/{n} | {point.accuracy:.1%} | {point.tokens:,.0f} |")
    lines += ["", *comparison_lines(greedy, sc, tree_points), *own_chains_lines(own),
              *between_runs_lines(trees, ids), *rerank_lines(sc, rerank)]
    return "\n".join(lines), table_rows
