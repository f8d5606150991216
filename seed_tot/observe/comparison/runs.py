"""A finished tree run's accuracy, answer rule by answer rule, re-derived from the files the run
stored (results.jsonl, one trace per problem, and cot_samples.jsonl when sampled chains were
added afterwards with scripts/add_cot_samples.py).

Every problem is scored against the question and gold answer stored in its own trace, never
against the bundled data looked up by id: a run on a user's data file is scored by that file's
answers. A bundled problem with the same id that disagrees with the trace stops the report.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from seed_tot.errors import SeedTotError
from seed_tot.observe.trace import Trace, jsonable, load_trace, tree_from_trace
from seed_tot.requests import GenerationResult, GenerationStats
from seed_tot.search.answers import is_chain_of_thought, select_answer
from seed_tot.search.chains import add_cot_node
from seed_tot.task import Problem, Task

ANSWER_RULES = ("final", "cot", "cot_vote", "search", "tree_vote")
CHAIN_RULES = ("final", "cot")  # a run without a tree: its final answer is its chains' vote, it has no search choice


def grows_a_tree(trace: Trace) -> bool:
    """False for a self-consistency run, which runs only chains of thought."""
    return trace.search != "self-consistency"


@dataclass
class ProblemReport:
    problem: Problem
    answers: dict[str, str | None]
    correct: dict[str, bool]
    recorded_answer: str | None
    tree_tokens: int
    sample_tokens: int
    path_vote_correct: bool = False  # the final answer with one vote per distinct path (vote_weight "path")
    chain_tokens: int = 0  # new tokens of the run's chains of thought (greedy, sampled, added), without the tree
    has_tree: bool = True

    @property
    def rules(self) -> tuple[str, ...]:
        """The answer rules that mean something for this run (a run without a tree has two)."""
        return ANSWER_RULES if self.has_tree else CHAIN_RULES


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def trace_of(run: Path, row: dict) -> Trace:
    """A results row's trace, found inside RUN/traces/ (the run folder may have moved)."""
    return load_trace(run / "traces" / row["trace_path"].rsplit("/traces/", 1)[-1])


def problem_of(trace: Trace, bundled: dict[str, Problem]) -> Problem:
    """The problem as the run saw it, from its trace; a bundled problem with the same id must agree."""
    known = bundled.get(trace.problem_id)
    if known is not None and (known.question != trace.question or jsonable(known.gold) != trace.gold):
        raise SeedTotError(
            f"Trace of {trace.problem_id} disagrees with the bundled problem of the same id (question or "
            f"gold answer differ): the run read another data file, so report it from its own traces only, "
            f"after renaming its problem ids."
        )
    meta = trace.problem_meta if trace.problem_meta is not None else (known.meta if known is not None else {})
    return Problem(id=trace.problem_id, question=trace.question, gold=trace.gold, meta=meta)


def sample_results(row: dict) -> list[GenerationResult]:
    """The sampled chains of one cot_samples.jsonl row, with the finish reasons the vote needs."""
    reasons, counts = row.get("finish_reasons"), row.get("sample_token_counts")
    if reasons is None or counts is None:
        raise SeedTotError(
            f"cot_samples.jsonl row {row.get('problem_id')} stores no finish reasons or token counts, so "
            f"its cut-off chains cannot be told apart: regenerate the file with scripts/add_cot_samples.py."
        )
    return [
        GenerationResult(request_id=f"cot-{index}", token_ids=[], text=text, finish_reason=reason,
                         stats=GenerationStats(new_tokens=count))
        for index, (text, reason, count) in enumerate(zip(row["samples"], reasons, counts, strict=True), 1)
    ]


def vote_answer(task: Task, problem: Problem, tree, chosen_id: int, keep) -> str | None:
    """The vote over the answer nodes kept by `keep` (None: none of them votes)."""
    selection = select_answer(task, problem, tree, chosen_id, vote=True, keep=keep)
    return selection.answer if selection.method in ("vote", "goal") else None


def search_choice(task: Task, problem: Problem, trace: Trace) -> tuple[int, str | None]:
    """(node id, answer) of the search's own choice. A voted trace's chosen path ends at the vote's
    node; older traces do not store the search's node, only its answer (the id then stands in
    where no node votes, and then the run itself did not vote either)."""
    selection = trace.selection or {}
    node_id = selection.get("search_node_id")
    if node_id is None and selection.get("method") == "vote":
        return trace.chosen_path[-1], selection.get("search_answer")
    node_id = trace.chosen_path[-1] if node_id is None else node_id
    node = next(record for record in trace.nodes if record.id == node_id)
    return node_id, task.extract_answer(problem, node.state)


def report_problem(task: Task, problem: Problem, trace: Trace, samples: list[GenerationResult]) -> ProblemReport:
    tree = tree_from_trace(trace)
    search_config = trace.config.get("search", {})
    for index, result in enumerate(samples, 1):
        add_cot_node(tree, task, problem, result, index, search_config.get("seed", 0))
    chosen, search_answer = search_choice(task, problem, trace)
    final = select_answer(task, problem, tree, chosen, vote=search_config.get("vote", True),
                          weight=search_config.get("vote_weight", "leaf"))
    answers = {
        "final": final.answer,
        "cot": final.cot_answer,
        "cot_vote": vote_answer(task, problem, tree, chosen, is_chain_of_thought),
        "search": search_answer,
        # no uncut answer leaf to vote on: the search's own choice answers, as in a run
        "tree_vote": vote_answer(task, problem, tree, chosen, lambda node: not is_chain_of_thought(node))
        or search_answer,
    }
    path_vote = select_answer(task, problem, tree, chosen, vote=search_config.get("vote", True), weight="path")
    return ProblemReport(
        problem=problem,
        answers=answers,
        correct={rule: task.score(problem, answer) == 1.0 for rule, answer in answers.items()},
        recorded_answer=trace.final_answer,
        tree_tokens=trace.metrics.new_tokens,
        sample_tokens=sum(r.stats.new_tokens for r in samples),
        path_vote_correct=task.score(problem, path_vote.answer) == 1.0,
        chain_tokens=sum(node.generation.new_tokens for node in tree.nodes()
                         if is_chain_of_thought(node) and node.generation is not None),
        has_tree=grows_a_tree(trace),
    )


def report_run(run: Path, tasks_by_name) -> list[ProblemReport]:
    """One ProblemReport per results row; `tasks_by_name(name)` gives the task of the traces."""
    results = run / "results.jsonl"
    if not results.is_file():
        raise SeedTotError(f"{run} holds no results.jsonl: give the --out folder of a task run.")
    traces = [trace_of(run, row) for row in read_jsonl(results)]
    names = {trace.task for trace in traces}
    if len(names) != 1:
        raise SeedTotError(f"{run} mixes traces of tasks {sorted(names)}: report one task's run at a time.")
    task = tasks_by_name(names.pop())
    bundled = {p.id: p for p in task.load()}
    samples_path = run / "cot_samples.jsonl"
    samples = {row["problem_id"]: row for row in read_jsonl(samples_path)} if samples_path.is_file() else {}
    return [
        report_problem(task, problem_of(trace, bundled), trace,
                       sample_results(samples[trace.problem_id]) if trace.problem_id in samples else [])
        for trace in traces
    ]


def run_wall_per_problem(run: Path) -> str:
    """Wall seconds per problem from the runs' own clocks (RUN/runs.jsonl), '-' without them."""
    path = run / "runs.jsonl"
    runs = read_jsonl(path) if path.is_file() else []
    problems = sum(r["problems"] for r in runs)
    return f"{sum(r['wall_seconds'] for r in runs) / problems:.0f}" if problems else "-"
