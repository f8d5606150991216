"""Chains of thought as votes: a pool's cot_samples.jsonl (written by scripts/add_cot_samples.py
--task or by `seed-tot train-value`), or the greedy and sampled chains stored inside a tree run's
traces (--cot-samples runs), each chain with the answer it votes and its new tokens."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from seed_tot.errors import SeedTotError
from seed_tot.observe.comparison.runs import problem_of, read_jsonl, sample_results, trace_of
from seed_tot.observe.trace import Trace
from seed_tot.requests import GenerationResult, GenerationStats
from seed_tot.search.answers import vote_candidates
from seed_tot.search.chains import add_cot_node
from seed_tot.task import Problem, Task
from seed_tot.tree import ReasoningTree

VALUES_FILE = "chain_values.jsonl"  # the logit evaluator's value of each pooled chain (scripts/rerank_pool.py)


def sample_indices(row: dict) -> list[int]:
    """The chain indices a pool row holds: 0 for a pool's greedy chain, then the samples (rows
    written before indices were stored hold samples 1..N)."""
    indices = row.get("sample_indices", list(range(1, len(row["samples"]) + 1)))
    return ([0] if "greedy" in row else []) + list(indices)


@dataclass
class Chains:
    """One problem's chains of thought: the greedy one (may be missing) and the samples in index order."""

    greedy_correct: bool | None = None
    greedy_tokens: int | None = None
    answers: list[str | None] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)
    correct: set[str] = field(default_factory=set)  # the sampled answers that score 1
    values: list[float | None] | None = None  # the logit evaluator's value per sample (None: not rated)


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
