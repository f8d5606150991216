"""The compute-matched comparison of `seed-tot report RUN [RUN...]`: greedy chain of thought,
self-consistency at K = 1, 2, 4, 8, 16 chains and every tree run, each with its accuracy and
generated tokens per problem, on the problems all given folders share, with paired tests.

A folder is a tree run (results.jsonl, traces) or a pool of chains (cot_samples.jsonl only,
written by scripts/add_cot_samples.py --task). The chains for self-consistency come from the
folder holding the most of them: a pool's or a run's cot_samples.jsonl, or the sampled chains
inside a run's traces (--cot-samples).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from math import comb
from pathlib import Path

from seed_tot.cli.run_report import (
    COLUMNS,
    ProblemReport,
    problem_of,
    read_jsonl,
    report_run,
    sample_results,
    trace_of,
)
from seed_tot.errors import SeedTotError
from seed_tot.values.rollouts import sample_indices
from seed_tot.observe.paired_stats import expected_vote_accuracy, mcnemar_exact, paired_bootstrap
from seed_tot.observe.rerank import best_chain_credit, expected_credit
from seed_tot.observe.trace import Trace
from seed_tot.requests import GenerationResult, GenerationStats
from seed_tot.search.answers import vote_candidates
from seed_tot.search.base import add_cot_node
from seed_tot.task import Problem, Task
from seed_tot.tree import ReasoningTree

SELF_CONSISTENCY_K = (1, 2, 4, 8, 16)
VALUES_FILE = "chain_values.jsonl"  # the logit evaluator's value of each pooled chain (scripts/rerank_pool.py)
BOOTSTRAP_RESAMPLES = 10_000
TOKENS_DEFINITION = (
    "tokens per problem = new tokens generated for the problem by every model call of the answer "
    "rule (tree thoughts, State Evaluator replies, greedy and sampled chains), averaged over the "
    "paired problems; prompt (prefill) tokens are not counted, so --value-mode logits evaluations "
    "count 0 and draft-model proposals are not counted."
)


@dataclass
class Chains:
    """One problem's chains of thought: the greedy one (may be missing) and the samples in index order."""

    greedy_correct: bool | None = None
    greedy_tokens: int | None = None
    answers: list[str | None] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)
    correct: set[str] = field(default_factory=set)  # the sampled answers that score 1
    values: list[float | None] | None = None  # the logit evaluator's value per sample (None: not rated)


@dataclass
class TreeRun:
    label: str
    reports: dict[str, ProblemReport]
    has_tree: bool = True  # False for a self-consistency run: its final answer is its chains' vote


def chain_answer(task: Task, problem: Problem, result: GenerationResult, index: int) -> str | None:
    """What a chain votes, by the rules of the tree's vote (cut off or rejected: None)."""
    tree = ReasoningTree()
    tree.add_root("")
    node = add_cot_node(tree, task, problem, result, index, 0)
    return next((answer for answer, candidate in vote_candidates(task, problem, tree) if candidate is node), None)


def as_result(text: str, reason: str, tokens: int, index: int) -> GenerationResult:
    return GenerationResult(request_id=f"cot-{index}", token_ids=[], text=text, finish_reason=reason,
                            stats=GenerationStats(new_tokens=tokens))


def chains_of(task: Task, problem: Problem, greedy: GenerationResult | None, samples: list[GenerationResult]) -> Chains:
    chains = Chains()
    if greedy is not None:
        chains.greedy_correct = task.score(problem, chain_answer(task, problem, greedy, 0)) == 1.0
        chains.greedy_tokens = greedy.stats.new_tokens
    for index, result in enumerate(samples, 1):
        answer = chain_answer(task, problem, result, index)
        chains.answers.append(answer)
        chains.tokens.append(result.stats.new_tokens)
        if answer is not None and task.score(problem, answer) == 1.0:
            chains.correct.add(answer)
    return chains


@dataclass
class PoolProblem:
    """One problem's recorded chains in a pool: the greedy chain (may be missing) and the samples in index order."""

    task: Task
    problem: Problem
    greedy: GenerationResult | None
    samples: list[GenerationResult]


def pool_problems(folder: Path, task_of, bundled_of) -> dict[str, PoolProblem]:
    """The chains of a folder's cot_samples.jsonl (rows of one problem joined in index order)."""
    rows: dict[str, list[dict]] = {}
    for row in read_jsonl(folder / "cot_samples.jsonl"):
        rows.setdefault(row["problem_id"], []).append(row)
    traces = {}
    if (folder / "results.jsonl").is_file():
        traces = {t.problem_id: t for t in (trace_of(folder, r) for r in read_jsonl(folder / "results.jsonl"))}
    found = {}
    for problem_id, group in rows.items():
        trace = traces.get(problem_id)
        task = task_of(trace.task if trace is not None else group[0]["settings"]["task"])
        problem = problem_of(trace, bundled_of(task)) if trace is not None else pool_problem(group[0], bundled_of(task))
        by_index, greedy = {}, trace_greedy(trace) if trace is not None else None
        for row in group:
            if "greedy" in row:
                greedy = as_result(row["greedy"], row["greedy_finish_reason"], row["greedy_token_count"], 0)
            indices = [i for i in sample_indices(row) if i != 0]
            by_index.update(zip(indices, sample_results(row), strict=True))
        found[problem_id] = PoolProblem(task, problem, greedy, [by_index[i] for i in sorted(by_index)])
    return found


def pool_dtypes(folder: Path) -> str:
    """', sampled in DTYPE' from a folder's cot_samples.jsonl rows, with the chains each dtype wrote
    when the rows differ (a pool grown on another machine); '' without rows."""
    path = folder / "cot_samples.jsonl"
    chains = Counter()
    for row in read_jsonl(path) if path.is_file() else []:
        chains[row.get("settings", {}).get("dtype", "dtype not recorded")] += len(row.get("samples", []))
    if len(chains) <= 1:
        return "".join(f", sampled in {dtype}" for dtype in chains)
    return ", sampled in " + " and ".join(f"{dtype} ({count:,} chains)" for dtype, count in chains.most_common())


def stored_values(folder: Path) -> dict[tuple[str, int], dict]:
    """The evaluator's rows of a pool's chains (scripts/rerank_pool.py), by (problem id, sample index)."""
    path = folder / VALUES_FILE
    return {(r["problem_id"], r["sample_index"]): r for r in read_jsonl(path)} if path.is_file() else {}


def pool_chains(folder: Path, task_of, bundled_of) -> dict[str, tuple[Problem, Chains]]:
    """The chains of a folder's cot_samples.jsonl, as votes, with their values where every one is rated."""
    values = stored_values(folder)
    found = {}
    for pid, p in pool_problems(folder, task_of, bundled_of).items():
        chains = chains_of(p.task, p.problem, p.greedy, p.samples)
        rows = [values.get((pid, i)) for i in range(1, len(p.samples) + 1)]
        if rows and all(row is not None for row in rows):
            chains.values = [row["value"] for row in rows]
        found[pid] = (p.problem, chains)
    return found


def pool_problem(row: dict, bundled: dict[str, Problem]) -> Problem:
    """A pool row's problem from the question and gold it stores; the bundled problem must agree."""
    problem = Problem(id=row["problem_id"], question=row["question"], gold=row["gold"], meta=row.get("problem_meta") or {})
    known = bundled.get(problem.id)
    if known is not None and known.question != problem.question:
        raise SeedTotError(f"Pool row {problem.id} disagrees with the bundled problem of the same id: "
                           f"the pool read another data file.")
    return problem


def trace_greedy(trace: Trace) -> GenerationResult | None:
    node = next((n for n in trace.nodes if n.info.get("cot")), None)
    if node is None:
        return None
    return as_result(node.thought, node.info.get("finish_reason", "eos"), node.generation.new_tokens, 0)


def trace_chains(folder: Path, task_of, bundled_of) -> dict[str, tuple[Problem, Chains]]:
    """The greedy and sampled chains stored inside a tree run's traces (--cot-samples runs)."""
    found = {}
    for row in read_jsonl(folder / "results.jsonl"):
        trace = trace_of(folder, row)
        task = task_of(trace.task)
        problem = problem_of(trace, bundled_of(task))
        samples = sorted((n for n in trace.nodes if n.info.get("cot_sample")), key=lambda n: n.info["cot_sample"])
        results = [as_result(n.thought, n.info.get("finish_reason", "eos"), n.generation.new_tokens, i)
                   for i, n in enumerate(samples, 1)]
        found[problem.id] = (problem, chains_of(task, problem, trace_greedy(trace), results))
    return found


def run_traces(folder: Path) -> list[Trace]:
    return [trace_of(folder, row) for row in read_jsonl(folder / "results.jsonl")]


def executors_of(traces: list[Trace]) -> str:
    """Dtype and method the traces recorded; with the problems each covers where a resumed run
    changed them (the search itself cannot change on --resume)."""
    where = Counter(f"{t.config.get('dtype', 'dtype not recorded')}, {t.config.get('method', t.executor)}"
                    for t in traces)
    if len(where) == 1:
        return next(iter(where))
    return "; ".join(f"{setting} on {count} problems" for setting, count in where.most_common())


def run_label(folder: Path, traces: list[Trace] | None = None) -> str:
    """The settings that tell tree runs apart: the search's from the first trace, dtype and method
    from all of them (read here unless given)."""
    traces = traces if traces is not None else run_traces(folder)
    trace = traces[0]
    search = trace.config.get("search", {})
    where = executors_of(traces)
    if trace.search == "self-consistency":
        return f"{folder.name} (self-consistency: greedy + {search.get('cot_samples')} sampled chains, {where})"
    parts = [trace.search, f"n={search.get('n_thoughts')}"]
    if search.get("thought_mode") in ("choose", "random"):
        parts.append("chosen moves" if search["thought_mode"] == "choose" else "random legal moves")
    if "breadth" in search:
        parts.append(f"b={search['breadth']}")
    if "iterations" in search:
        parts.append(f"iterations={search['iterations']}")
    value_mode = search.get("value_mode", "samples")
    parts += [f"k={search.get('value_samples')} samples" if value_mode == "samples" else value_mode,
              f"cot samples {search.get('cot_samples', 'not recorded')}" if search.get("cot_candidate", True)
              else "no chains of thought",
              f"vote {search.get('vote_weight', 'leaf')}"]
    if search.get("known_states") is False:
        parts.append("known states off")
    if search.get("backtrack") is False:
        parts.append("no backtracking")
    parts.append(where)
    return f"{folder.name} ({', '.join(str(p) for p in parts)})"


def bundled_loader():
    """A function from a task to its bundled problems by id, each task loaded once."""
    bundles: dict[str, dict[str, Problem]] = {}

    def bundled_of(task: Task) -> dict[str, Problem]:
        if task.name not in bundles:
            bundles[task.name] = {p.id: p for p in task.load()}
        return bundles[task.name]

    return bundled_of


def load_folders(folders: list[Path], task_of):
    """(tree runs, chains per problem, the chains' source folder)."""
    bundled_of = bundled_loader()
    trees, pools = [], []
    for folder in folders:
        is_run, has_pool = (folder / "results.jsonl").is_file(), (folder / "cot_samples.jsonl").is_file()
        if not is_run and not has_pool:
            raise SeedTotError(f"{folder} holds neither a run (results.jsonl) nor chains (cot_samples.jsonl).")
        if is_run:
            reports, traces = {r.problem.id: r for r in report_run(folder, task_of)}, run_traces(folder)
            trees.append(TreeRun(run_label(folder, traces), reports, traces[0].search != "self-consistency"))
            pools.append((folder, trace_chains(folder, task_of, bundled_of)))
        if has_pool:
            pools.append((folder, pool_chains(folder, task_of, bundled_of)))
    source, chains = max(pools, key=lambda item: sum(len(c.answers) for _, c in item[1].values()))
    return trees, chains, source


def shared_ids(trees: list[TreeRun], chains: dict) -> list[str]:
    ids = [pid for pid in chains if all(pid in tree.reports for tree in trees)]
    return sorted(ids, key=lambda pid: (len(pid), pid))


@dataclass
class Point:
    label: str
    per_problem: list[float]  # correctness (0/1, or an expectation) per paired problem
    tokens: float

    @property
    def accuracy(self) -> float:
        return sum(self.per_problem) / len(self.per_problem)


def self_consistency_points(chains: list[Chains]) -> list[tuple[int, Point]]:
    pool = min(len(c.answers) for c in chains)
    points = []
    for k in (k for k in SELF_CONSISTENCY_K if k <= pool):
        how = "all" if k == pool else f"exact mean over all {comb(pool, k)} {k}-subsets"
        per = [expected_vote_accuracy(c.answers[:pool], c.correct, k) for c in chains]
        tokens = sum(k * sum(c.tokens[:pool]) / pool for c in chains) / len(chains)
        points.append((k, Point(f"self-consistency K={k} ({how} of {pool} sampled chains)", per, tokens)))
    return points


def rerank_points(chains: list[Chains], sc: list[tuple[int, Point]]) -> list[tuple[int, Point]]:
    """Best-of-K reranked by the stored evaluator values, on the chains and tokens of self-consistency K."""
    pool = min(len(c.answers) for c in chains)
    points = []
    for k, vote in sc:
        per = [expected_credit(best_chain_credit, list(zip(c.answers[:pool], c.values[:pool])), c.correct, k)
               for c in chains]
        points.append((k, Point(f"best-of-K K={k} reranked by the logit evaluator (the same chains)", per,
                                vote.tokens)))
    return points


def comparison_points(trees: list[TreeRun], chains: dict, ids: list[str]):
    pool = [chains[pid][1] for pid in ids]
    greedy = None
    if all(c.greedy_correct is not None for c in pool):
        greedy = Point("greedy chain of thought", [float(c.greedy_correct) for c in pool],
                       sum(c.greedy_tokens for c in pool) / len(pool))
    sc = self_consistency_points(pool) if all(c.answers for c in pool) else []
    rerank = rerank_points(pool, sc) if sc and all(c.values is not None for c in pool) else []
    tree_points = []
    for tree in trees:
        reports = [tree.reports[pid] for pid in ids]
        tokens = sum(r.tree_tokens + r.sample_tokens for r in reports) / len(reports)
        tree_points.append(Point(f"run {tree.label}: final", [float(r.correct["final"]) for r in reports], tokens))
        tree_points.append(Point(f"run {tree.label}: final, one vote per path",
                                 [float(r.path_vote_correct) for r in reports], tokens))
    return greedy, sc, rerank, tree_points


def own_chains_points(trees: list[TreeRun], ids: list[str]) -> list[tuple[Point, Point]]:
    """(final, its own chains' vote) for each run with a tree: what the tree adds to the chains it ran."""
    pairs = []
    for tree in (t for t in trees if t.has_tree):
        reports = [tree.reports[pid] for pid in ids]
        final = Point(f"run {tree.label}: final", [float(r.correct["final"]) for r in reports],
                      sum(r.tree_tokens + r.sample_tokens for r in reports) / len(reports))
        chains = Point("its chains' vote alone (greedy + sampled chains, no tree)",
                       [float(r.correct["cot_vote"]) for r in reports],
                       sum(r.chain_tokens for r in reports) / len(reports))
        pairs.append((final, chains))
    return pairs


def own_chains_lines(pairs: list[tuple[Point, Point]]) -> list[str]:
    lines = []
    for final, chains in pairs:
        low, high = paired_bootstrap([a - b for a, b in zip(final.per_problem, chains.per_problem)],
                                     BOOTSTRAP_RESAMPLES)
        lines.append(f"- {final.label} vs {chains.label} ({final.tokens:.0f} tokens vs {chains.tokens:.0f}): "
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


def matched_k(sc: list[tuple[int, Point]], tokens: float) -> tuple[int, Point]:
    """The smallest K whose chains cost at least `tokens`, else the largest K there is."""
    return next(((k, p) for k, p in sc if p.tokens >= tokens), sc[-1])


def verdict(low: float, high: float, first: str = "the run") -> str:
    """What a 95% interval of (first - second) supports."""
    if low > 0:
        return f"{first} is better"
    if high < 0:
        return f"{first} is worse"
    return "no difference the data supports"


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
             TOKENS_DEFINITION, "Self-consistency: majority vote over the chains that answer (cut-off chains do "
             "not vote), ties broken uniformly at random (expected credit), no vote = wrong.", "",
             "| answer | correct | accuracy | tokens / problem |", "|---|---|---|---|"]
    own = own_chains_points(trees, ids)
    table_rows = points + [Point(f"{final.label.removesuffix(': final')}: {chains.label}", chains.per_problem,
                                 chains.tokens) for final, chains in own]
    for point in table_rows:
        correct = sum(point.per_problem)
        shown = f"{correct:.0f}" if correct == int(correct) else f"{correct:.2f}"
        lines.append(f"| {point.label} | {shown}/{n} | {point.accuracy:.1%} | {point.tokens:,.0f} |")
    lines += ["", *comparison_lines(greedy, sc, tree_points), *own_chains_lines(own),
              *between_runs_lines(trees, ids), *rerank_lines(sc, rerank)]
    return "\n".join(lines), table_rows


def draw(points: list[Point], path: Path, folders) -> Path:
    """The comparison's points as a PNG (accuracy against tokens per problem)."""
    from seed_tot.observe.accuracy_plot import plot_accuracy_vs_tokens

    greedy = next(((p.tokens, p.accuracy) for p in points if p.label == "greedy chain of thought"), None)
    curve = [(int(p.label.split("K=")[1].split()[0]), p.tokens, p.accuracy) for p in points
             if p.label.startswith("self-consistency")]
    reranked = [(int(p.label.split("K=")[1].split()[0]), p.tokens, p.accuracy) for p in points
                if p.label.startswith("best-of-K")]
    trees = [(p.label.removeprefix("run "), p.tokens, p.accuracy) for p in points if p.label.startswith("run ")]
    n = len(points[0].per_problem)
    title = f"{', '.join(Path(f).name for f in folders)}: {n} problems"
    return plot_accuracy_vs_tokens(greedy, curve, trees, path, title, reranked)
