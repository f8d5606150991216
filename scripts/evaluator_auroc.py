"""How well the State Evaluator's values tell good steps from bad ones, from recorded traces.

    python scripts/evaluator_auroc.py DIR_OR_TRACE [...] [--logits FILE [--rescore --target NAME]]

For every step the evaluator rated (a node with a value that no rule rejected), the label is
whether its subtree reaches a correct answer: some answer node below it (or the step itself),
not rejected, whose answer the task scores 1.0. The AUROC of the values against these labels
is the chance that a step that reaches a correct answer got a higher value than one that does
not (ties count half; 0.5 = no better than a coin). Two sets of steps are reported:
- "answered": steps with at least one answer node in their subtree (the others never showed
  whether they lead anywhere);
- "all": every rated step; a step with no answer below counts as not reaching the answer.
Rows are per trace directory and pooled per task, per evaluator mode (the mode the traces were
searched with, "samples" unless their config says "logits").

--logits FILE adds mode "logits" for the same steps, from FILE (JSON lines written by --rescore:
one per step, the value read from the verdict words' next-token probabilities after the
task's verdict prefix, the State Evaluator's logit mode). With --rescore the steps not yet in
FILE are scored with --target (one forward per step, the steps of a trace in one batch) and
appended, so an interrupted run continues where it stopped.
"""

from __future__ import annotations

import json
import sys
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import click

from seed_tot.observe.paired_stats import auroc
from seed_tot.observe.trace import Trace, load_trace, tree_from_trace
from seed_tot.records import GZIP_SUFFIX, append_json_lines, stored_files
from seed_tot.tree import ReasoningTree
from seed_tot.task import Problem
from seed_tot_tasks import get_task


@dataclass
class Step:
    source: str  # the trace directory (or file) given on the command line
    trace: str  # trace file
    task: str
    mode: str
    node_id: int
    value: float
    reaches: bool  # some answer in its subtree is correct
    answered: bool  # its subtree holds an answer
    eval_tokens: int = 0  # tokens the evaluator generated to rate it


def trace_files(paths: list[Path]) -> list[tuple[str, Path]]:
    """(source, trace file) for each path: a trace file, or every *.json (or *.json.gz) below a directory."""
    found = []
    for path in paths:
        if path.is_dir():
            found += [(str(path), f) for f in stored_files(path, "*.json")]
        elif path.is_file():
            found.append((str(path), path))
        else:
            raise SystemExit(f"{path} does not exist: pass trace files or directories of traces.")
    return found


def problem_of(trace: Trace, known: dict[str, Problem]) -> Problem:
    """The task's own problem (with its metadata, e.g. a Blocksworld instance), else one from the trace."""
    return known.get(trace.problem_id) or Problem(id=trace.problem_id, question=trace.question, gold=trace.gold)


def rated(tree: ReasoningTree) -> list[int]:
    """Ids of the steps the evaluator rated (no rule rejected them, no chain-of-thought node)."""
    return [n.id for n in tree.nodes() if n.value is not None and n.value_parsed is not None and "rejected" not in n.info]


def labels(task, problem: Problem, tree: ReasoningTree) -> dict[int, tuple[bool, bool]]:
    """node id -> (reaches a correct answer, holds an answer) for its subtree."""
    out: dict[int, tuple[bool, bool]] = {}
    for node in sorted(tree.nodes(), key=lambda n: -n.depth):  # children before parents
        is_answer = node.kind == "answer" and "rejected" not in node.info and node.depth > 0
        correct = is_answer and task.score(problem, task.extract_answer(problem, node.state)) == 1.0
        below = [out[child.id] for child in tree.children(node.id)]
        out[node.id] = (correct or any(r for r, _ in below), is_answer or any(a for _, a in below))
    return out


_tasks: dict[str, tuple] = {}


def task_and_problems(name: str):
    if name not in _tasks:
        task = get_task(name)
        _tasks[name] = (task, {p.id: p for p in task.load()})
    return _tasks[name]


def read_steps(files: list[tuple[str, Path]]) -> tuple[list[Step], dict[str, tuple]]:
    """The rated steps of every trace; and per trace file (trace, task, problem, tree)."""
    steps, loaded = [], {}
    for source, path in files:
        trace = load_trace(path)
        task, known = task_and_problems(trace.task)
        problem = problem_of(trace, known)
        tree = tree_from_trace(trace)
        key = str(path.with_name(path.name.removesuffix(GZIP_SUFFIX)))  # a compressed trace keeps its name
        loaded[key] = (trace, task, problem, tree)
        mode = trace.config.get("search", {}).get("value_mode", "samples")
        marks = labels(task, problem, tree)
        for node_id in rated(tree):
            reaches, answered = marks[node_id]
            node = tree.node(node_id)
            tokens = node.evaluation.new_tokens if node.evaluation is not None else 0
            steps.append(Step(source, key, trace.task, mode, node_id, float(node.value), reaches, answered, tokens))
    return steps, loaded


def read_logits(path: Path) -> dict[tuple[str, int], dict]:
    if not path.is_file():
        return {}
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return {(row["trace"], row["node_id"]): row for row in rows}


def rescore_steps(steps: list[Step], loaded: dict, out: Path, target_name: str, dtype: str, method: str,
                  answered_only: bool = False) -> None:
    """Append to `out` the logit-mode value of every step not yet there (one batch per trace)."""
    from seed_tot.config import DecodeConfig
    from seed_tot.models.loading import load_model
    from seed_tot.reasoning.evaluator import StateEvaluator
    from seed_tot.reasoning.prompting import PromptFormatter
    from seed_tot.scheduling.factory import make_executor

    done = read_logits(out)
    todo: dict[str, list[int]] = defaultdict(list)
    for step in steps:
        if (step.trace, step.node_id) not in done and (step.answered or not answered_only):
            todo[step.trace].append(step.node_id)
    if not todo:
        return
    target = load_model(target_name, dtype=dtype)
    formatter = PromptFormatter(target.tokenizer)
    executor = make_executor(method, target)
    evaluators = {}
    print(f"rescoring {sum(map(len, todo.values()))} steps of {len(todo)} traces with {target.name} "
          f"({str(target.dtype).removeprefix('torch.')}, {method})", file=sys.stderr)
    for trace_path, node_ids in todo.items():
        trace, task, problem, tree = loaded[trace_path]
        if trace.task not in evaluators:
            evaluators[trace.task] = StateEvaluator(task, formatter, DecodeConfig(), 0, mode="logits")
        evaluator = evaluators[trace.task]
        nodes = [tree.node(i) for i in node_ids]
        requests = evaluator.requests(problem, nodes)
        started = time.perf_counter()
        results = executor.run(requests)
        seconds = time.perf_counter() - started
        rows = [{"trace": trace_path, "node_id": node.id, "value": evaluation.value,
                 "verdict_probs": evaluation.verdict_probs, "verdict_mass": evaluation.verdict_mass,
                 "prompt_tokens": len(requests[nodes.index(node)].prompt_ids),
                 "batch_seconds": round(seconds, 3), "batch_size": len(requests)}
                for node, evaluation in zip(nodes, evaluator.read(problem, nodes, requests, results))]
        append_json_lines(out, rows)
        print(f"{trace_path}: {len(nodes)} steps in {seconds:.1f} s", file=sys.stderr)
    executor.close()


def table(steps: list[Step]) -> list[str]:
    groups: dict[tuple[str, str, str], list[Step]] = defaultdict(list)
    for step in steps:
        groups[(step.task, step.mode, step.source)].append(step)
        groups[(step.task, step.mode, "(all)")].append(step)
    lines = ["| task | mode | traces | answered steps | reach gold | AUROC answered | all steps | AUROC all "
             "| evaluator tokens per step | distinct values |",
             "|---|---|---|---|---|---|---|---|---|---|"]

    def cell(x: float | None) -> str:
        return "n/a" if x is None else f"{x:.3f}"

    for (task, mode, source), members in sorted(groups.items()):
        answered = [s for s in members if s.answered]
        lines.append(
            f"| {task} | {mode} | {source} | {len(answered)} | {sum(s.reaches for s in answered)} "
            f"| {cell(auroc([s.value for s in answered], [s.reaches for s in answered]))} "
            f"| {len(members)} | {cell(auroc([s.value for s in members], [s.reaches for s in members]))} "
            f"| {sum(s.eval_tokens for s in members) / len(members):.1f} | {len({s.value for s in members})} |"
        )
    return lines


@click.command(help=__doc__)
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--logits", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="JSON lines of logit-mode values (see --rescore)")
@click.option("--rescore", is_flag=True, help="score the steps missing from --logits with --target")
@click.option("--target", default="default-target", show_default=True)
@click.option("--dtype", default="auto", show_default=True)
@click.option("--method", default="batched", show_default=True)
@click.option("--answered-only", is_flag=True, help="--rescore only the answered steps")
def main(paths: tuple[Path, ...], logits: Path | None, rescore: bool, target: str, dtype: str, method: str,
         answered_only: bool) -> None:
    if rescore and logits is None:
        raise click.UsageError("--rescore writes its values to --logits FILE: give that file.")
    steps, loaded = read_steps(trace_files(list(paths)))
    if rescore:
        rescore_steps(steps, loaded, logits, target, dtype, method, answered_only)
    if logits is not None:
        values = read_logits(logits)
        scored = [s for s in steps if (s.trace, s.node_id) in values]
        if len(scored) < len(steps):
            print(f"{len(steps) - len(scored)} of {len(steps)} steps have no logit value: both modes are "
                  "reported on the steps that have one", file=sys.stderr)
        steps = scored + [Step(s.source, s.trace, s.task, "logits", s.node_id, float(values[(s.trace, s.node_id)]["value"]),
                               s.reaches, s.answered, 0) for s in scored]  # logit mode generates no token
    print("\n".join(table(steps)))


if __name__ == "__main__":
    main()
