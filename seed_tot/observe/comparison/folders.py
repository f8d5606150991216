"""The folders given to `seed-tot report`: each tree run with its label and per-problem reports, and
the chains of thought from the folder holding the most of them (a pool's or a run's
cot_samples.jsonl, or the sampled chains inside a run's traces)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from seed_tot.errors import SeedTotError
from seed_tot.observe.comparison.pools import pool_chains, trace_chains
from seed_tot.observe.comparison.runs import ProblemReport, grows_a_tree, read_jsonl, report_run, trace_of
from seed_tot.observe.trace import Trace
from seed_tot.task import Problem, Task


@dataclass
class TreeRun:
    label: str
    reports: dict[str, ProblemReport]
    has_tree: bool = True  # False for a self-consistency run: its final answer is its chains' vote


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
    branched = " branched from its chains" if search.get("escalate_from") == "chains" else ""
    second_round = (f", {search['escalate_samples']} more{branched} where the vote's winner holds "
                    f"< {search.get('escalate_below')}" if search.get("escalate_samples") else "")
    if trace.search == "self-consistency":
        return (f"{folder.name} (self-consistency: greedy + {search.get('cot_samples')} sampled chains{second_round}, "
                f"{where})")
    parts = [trace.search, f"n={search.get('n_thoughts')}"]
    if search.get("thought_mode") in ("choose", "random"):
        parts.append("chosen moves" if search["thought_mode"] == "choose" else "random legal moves")
    if "breadth" in search:
        parts.append(f"b={search['breadth']}")
    if "iterations" in search:
        parts.append(f"iterations={search['iterations']}")
    value_mode = search.get("value_mode", "samples")
    parts += [f"k={search.get('value_samples')} samples" if value_mode == "samples" else value_mode,
              f"cot samples {search.get('cot_samples', 'not recorded')}{second_round}" if search.get("cot_candidate", True)
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
            trees.append(TreeRun(run_label(folder, traces), reports, grows_a_tree(traces[0])))
            pools.append((folder, trace_chains(folder, task_of, bundled_of)))
        if has_pool:
            pools.append((folder, pool_chains(folder, task_of, bundled_of)))
    source, chains = max(pools, key=lambda item: sum(len(c.answers) for _, c in item[1].values()))
    return trees, chains, source


def shared_ids(trees: list[TreeRun], chains: dict) -> list[str]:
    ids = [pid for pid in chains if all(pid in tree.reports for tree in trees)]
    return sorted(ids, key=lambda pid: (len(pid), pid))
