"""The judged vote's second round grown as branches of its first-round chains, against drawing it
afresh, on stored held-out pools.

For every problem of each pool (POOL:SAMPLES, SAMPLES >= 8) the first round is the pool's greedy chain
and samples 1-4, valued by the head (its values stored in VALUES_DIR by scripts/judge_values.py, as
scripts/judged_escalation.py reads them). Where that judged vote is unsure (its winner holds less than
--below of the summed values) two second rounds are compared on the same first round: the pool's
samples 5-8 (afresh, what `--escalate 4` draws) and 4 branches that continue the first half of the
best-valued chain of the leading answer and of the runner-up (what `--escalate 4 --escalate-from
chains` draws: the search's own functions build, seed and add them; the target decodes them in
process and the packaged judge values them). Branches are stored per problem in OUT-branches.jsonl
with their settings, so an interrupted run resumes. Tokens are new (decoded) tokens per problem,
the greedy chain's included; a branch's prefix is prefilled, not decoded, and reported beside.

    python scripts/branched_escalation.py results/value-gsm8k/judge-values --heldout results/heldout-gsm8k-43-100/cot-pool:16 \\
        --heldout results/heldout-gsm8k-101-160/cot-pool:8 --heldout results/heldout-gsm8k-161-220/cot-pool:8 \\
        --head seed_tot/values/heads/becdaa3f9b2b78ec.safetensors --out results/value-gsm8k/branched_escalation
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import click

ROOT = Path(__file__).resolve().parents[1]
for folder in (ROOT, ROOT / "scripts"):  # the package, tasks/ and the escalation script's readers
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))

from judged_escalation import heldout_values  # noqa: E402

from seed_tot.analysis.report_files import write_report  # noqa: E402
from seed_tot.search import SearchConfig  # noqa: E402
from seed_tot.search.answers import Selection, select_answer  # noqa: E402
from seed_tot.search.chains import add_branch_node, add_cot_node, branch_requests, rate_chains  # noqa: E402
from seed_tot.search.branching import plan_branches  # noqa: E402
from seed_tot.search.escalation import unsure  # noqa: E402
from seed_tot.tree import ReasoningTree  # noqa: E402

FIRST_ROUND = range(0, 5)  # the greedy chain and samples 1-4
SECOND_ROUND = range(5, 9)  # samples 5-8, or the branches that take their indices


def chain_tree(p, values: dict, indices: range) -> ReasoningTree:
    """A tree holding the pool's chains `indices` (0 greedy), each valued as stored."""
    tree = ReasoningTree()
    tree.add_root("")
    add_pool_chains(tree, p, values, indices)
    return tree


def add_pool_chains(tree: ReasoningTree, p, values: dict, indices: range) -> None:
    for index in indices:
        result = p.greedy if index == 0 else p.samples[index - 1]
        node = add_cot_node(tree, p.task, p.problem, result, index, 0)
        if "rejected" not in node.info and (p.problem.id, index) in values:
            node.value, node.value_parsed = values[(p.problem.id, index)], True


def credit(p, tree: ReasoningTree) -> tuple[float, Selection]:
    selection = select_answer(p.task, p.problem, tree, tree.root.id, vote=True, weight="value")
    return float(p.task.score(p.problem, selection.answer) == 1.0) if selection.answer is not None else 0.0, selection


def tokens(tree: ReasoningTree) -> int:
    return sum(node.generation.new_tokens for node in tree.nodes() if node.generation is not None)


def branch_plan(p, tree: ReasoningTree, selection, config: SearchConfig, formatter):
    """(sources, prefixes, requests) of the branches the search would grow from `tree`."""
    sources, prefixes = plan_branches(p.task, p.problem, tree, selection.votes, len(SECOND_ROUND))
    if not sources:
        return [], [], []
    requests = branch_requests(formatter, p.task.cot_prompt(p.problem), config, p.problem.id, sources, prefixes,
                               SECOND_ROUND)
    return sources, prefixes, requests


def stored_branches(path: Path) -> dict[str, dict]:
    if not path.is_file():
        return {}
    return {row["problem_id"]: row for row in map(json.loads, filter(str.strip, path.read_text().splitlines()))}


def grow_branches(jobs: list, config: SearchConfig, formatter, judge, executor, store: Path, settings: dict,
                  per_call: int) -> None:
    """Decode and value the branches of `jobs` [(p, tree, selection)], `per_call` problems per
    executor call, appending each finished problem's row to `store`."""
    for start in range(0, len(jobs), per_call):
        chunk = jobs[start:start + per_call]
        plans = [branch_plan(p, tree, selection, config, formatter) for p, tree, selection in chunk]
        for (p, _, _), (sources, _, _) in zip(chunk, plans, strict=True):
            if not sources:  # no first-round chain answered: the search draws its second round afresh
                with store.open("a") as out:
                    out.write(json.dumps({"problem_id": p.problem.id, **settings, "afresh": True}) + "\n")
        kept = [i for i, plan in enumerate(plans) if plan[0]]
        chunk, plans = [chunk[i] for i in kept], [plans[i] for i in kept]
        if not chunk:
            continue
        began = time.perf_counter()
        results = executor.run([r for _, _, requests in plans for r in requests])
        seconds = time.perf_counter() - began
        offset = 0
        with store.open("a") as out:
            for (p, tree, _), (sources, prefixes, requests) in zip(chunk, plans, strict=True):
                mine = results[offset:offset + len(requests)]
                offset += len(requests)
                nodes = [add_branch_node(tree, p.task, p.problem, result, index, source, prefix, request.seed)
                         for result, index, source, prefix, request
                         in zip(mine, SECOND_ROUND, sources, prefixes, requests, strict=True)]
                rate_chains(judge, p.task, p.problem, nodes)
                correct, selection = credit(p, tree)
                prompt_tokens = len(formatter.encode(p.task.cot_prompt(p.problem)))
                out.write(json.dumps({
                    "problem_id": p.problem.id, **settings, "call_seconds": round(seconds, 1),
                    "correct": correct, "answer": selection.answer, "votes": selection.votes,
                    "branches": [{"index": node.info["cot_branch"], "from_index": source.info.get("cot_sample", 0),
                                  "prefix_chars": len(prefix), "prefix_tokens": len(request.prompt_ids) - prompt_tokens,
                                  "text": node.thought, "finish_reason": node.info["finish_reason"],
                                  "new_tokens": node.generation.new_tokens, "seed": str(request.seed),
                                  "value": node.value, "rejected": node.info.get("rejected")}
                                 for node, source, prefix, request in zip(nodes, sources, prefixes, requests,
                                                                         strict=True)],
                }) + "\n")
        print(f"{min(start + per_call, len(jobs))}/{len(jobs)} problems branched ({seconds:.0f} s)", flush=True)


def arms(p, values: dict, samples: int, below: float, rows: dict) -> dict | None:
    """One problem's credit and new tokens under each rule; None while its branches are not grown."""
    from seed_tot.observe.comparison.pools import chain_answer
    from seed_tot.observe.paired_stats import expected_vote_accuracy

    first = chain_tree(p, values, FIRST_ROUND)
    one, selection = credit(p, first)
    found = {"problem_id": p.problem.id, "unsure": unsure(selection, below),
             "one_round": (one, tokens(first))}
    pool = p.samples[:samples]
    correct = {a for a in (chain_answer(p.task, p.problem, r, i) for i, r in enumerate(pool, 1))
               if a is not None and p.task.score(p.problem, a) == 1.0}
    answers = [chain_answer(p.task, p.problem, r, i) for i, r in enumerate(pool, 1)]
    found["plain_vote_8"] = (expected_vote_accuracy(answers, correct, 8),
                             8 * sum(r.stats.new_tokens for r in pool) / len(pool))
    if not found["unsure"]:
        found["fresh"] = found["branched"] = found["one_round"]
        return found
    both = chain_tree(p, values, FIRST_ROUND)
    add_pool_chains(both, p, values, SECOND_ROUND)
    found["fresh"] = (credit(p, both)[0], tokens(both))
    row = rows.get(p.problem.id)
    if row is None:
        return None
    if row.get("afresh"):  # no first-round chain answered: nothing to branch from
        found["branched"], found["prefix_tokens"] = found["fresh"], 0
        return found
    found["branched"] = (row["correct"], tokens(first) + sum(b["new_tokens"] for b in row["branches"]))
    found["prefix_tokens"] = sum(b["prefix_tokens"] for b in row["branches"])
    return found


def summary(name: str, found: list[dict], resamples: int) -> tuple[list[str], dict]:
    from seed_tot.observe.paired_stats import paired_bootstrap

    n = len(found)
    rules = ("plain_vote_8", "one_round", "fresh", "branched")
    table = {rule: {"correct": round(sum(f[rule][0] for f in found), 2),
                    "tokens": round(sum(f[rule][1] for f in found) / n, 1)} for rule in rules}
    for rule in ("fresh", "one_round", "plain_vote_8"):
        low, high = paired_bootstrap([f["branched"][0] - f[rule][0] for f in found], resamples=resamples)
        table[f"branched_minus_{rule}"] = {"points": round((table["branched"]["correct"] - table[rule]["correct"]) / n, 4),
                                          "ci95": [round(low, 4), round(high, 4)]}
    unsure = [f for f in found if f["unsure"]]
    table["unsure"] = len(unsure)
    table["prefix_tokens_per_unsure_problem"] = round(sum(f["prefix_tokens"] for f in unsure) / max(1, len(unsure)), 1)
    labels = {"plain_vote_8": "plain vote of 8 samples (exact mean over 8-subsets)",
              "one_round": "judged vote, greedy + 4 (one round)",
              "fresh": "two rounds, the second afresh (the default)", "branched": "two rounds, the second branched"}
    lines = [f"## {name} ({n} problems, {len(unsure)} unsure after the first round)", "",
             "| rule | correct | new tokens per problem |", "|---|---|---|"]
    lines += [f"| {labels[rule]} | {table[rule]['correct']:.2f}/{n} | {table[rule]['tokens']:,.0f} |" for rule in rules]
    lines += [""] + [f"- branched - {labels[rule]}: {table[f'branched_minus_{rule}']['points']:+.1%} "
                     f"[{table[f'branched_minus_{rule}']['ci95'][0]:+.1%}, {table[f'branched_minus_{rule}']['ci95'][1]:+.1%}]"
                     for rule in ("fresh", "one_round", "plain_vote_8")]
    lines += [f"- prefilled prefix tokens per unsure problem (not decoded): {table['prefix_tokens_per_unsure_problem']:,.0f}"]
    return lines, table


@click.command()
@click.argument("values_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--heldout", multiple=True, required=True, help="POOL:SAMPLES (test problems, >= 8 samples), repeatable.")
@click.option("--head", "head_path", type=click.Path(exists=True, dir_okay=False, path_type=Path), required=True,
              help="The packaged head: it values the branches (VALUES_DIR holds its values of the stored chains).")
@click.option("--below", type=float, default=0.7, show_default=True, help="The second round's threshold.")
@click.option("--dtype", default="auto", show_default=True)
@click.option("--method", default="batched-lookup", show_default=True, help="The in-process method decoding branches.")
@click.option("--per-call", type=int, default=8, show_default=True, help="Problems per executor call.")
@click.option("--resamples", type=int, default=10_000, show_default=True)
@click.option("--out", type=click.Path(path_type=Path), required=True,
              help="Writes OUT.md, OUT.json and the branches to OUT-branches.jsonl.")
def main(values_dir, heldout, head_path, below, dtype, method, per_call, resamples, out):
    from seed_tot.observe.comparison import bundled_loader
    from seed_tot.observe.comparison.pools import pool_problems
    from seed_tot_tasks import get_task

    config = SearchConfig(escalate_samples=len(SECOND_ROUND), escalate_below=below, escalate_from="chains")
    store = out.with_name(out.name + "-branches.jsonl")
    store.parent.mkdir(parents=True, exist_ok=True)
    pools = []
    for spec, (values, samples) in heldout_values(values_dir, list(heldout)).items():
        problems = pool_problems(Path(spec.rsplit(":", 1)[0]), get_task, bundled_loader())
        pools.append((spec, values, samples, [problems[pid] for pid in sorted(problems)
                                              if problems[pid].greedy is not None and len(problems[pid].samples) >= 8]))
    rows = stored_branches(store)
    pending = []
    for _, values, samples, problems in pools:
        for p in problems:
            if arms(p, values, samples, below, rows) is None:
                tree = chain_tree(p, values, FIRST_ROUND)
                pending.append((p, tree, credit(p, tree)[1]))
    if pending:
        from seed_tot.models.loading import load_model
        from seed_tot.reasoning.prompting import PromptFormatter
        from seed_tot.scheduling.factory import make_executor
        from seed_tot.values.judge import LearnedJudge

        target = load_model("default-target", dtype=dtype)
        judge = LearnedJudge.load(target, head_path)
        settings = {"target": "default-target", "dtype": str(target.model.dtype).removeprefix("torch."),
                    "method": method, "head": judge.head_id, "seed": config.seed, "below": below,
                    "share_kept": 0.5, "command": " ".join(sys.argv)}
        executor = make_executor(method, target, None)
        try:
            grow_branches(pending, config, PromptFormatter(target.tokenizer), judge, executor, store, settings, per_call)
        finally:
            executor.close()
        rows = stored_branches(store)
    found = {"command": " ".join(sys.argv), "head": str(head_path), "below": below, "heldout": {}}
    lines = ["# The judged vote's second round: afresh or branched from the first round's chains", "",
             f"Command: `python {found['command']}`", ""]
    everything = []
    for spec, values, samples, problems in pools:
        per_problem = [arms(p, values, samples, below, rows) for p in problems]
        everything += per_problem
        section, found["heldout"][spec] = summary(spec, per_problem, resamples)
        lines += section + [""]
    section, found["all"] = summary("all pools", everything, resamples)
    lines += section
    found["per_problem"] = everything
    write_report(out, found, "\n".join(lines), indent=1)


if __name__ == "__main__":
    main()
