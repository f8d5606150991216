"""Best-of-K reranking with the real State Evaluator, on the same chains self-consistency votes with.

    python scripts/rerank_pool.py POOL --score [--target default-target] [--dtype auto] [--per-call 4]
    python scripts/rerank_pool.py POOL                  # the report only, from the stored values

POOL is a folder with cot_samples.jsonl (scripts/add_cot_samples.py). --score rates every sampled
chain that has no value yet with the logit State Evaluator, exactly as `--search best-of-n
--value-mode logits` rates its chains (same evaluator prompt; one forward per chain, no token
generated), `--per-call` problems per executor call, and appends one row per chain to
POOL/chain_values.jsonl (value, verdict probabilities, prompt tokens, settings), so a stopped run
resumes. The report pairs, problem by problem and at K = 1, 2, 4, 8, 16 chains, self-consistency,
best-of-K (the highest-valued chain answers) and a value-weighted vote, each the exact mean over
every K-subset of the problem's chains, with a paired bootstrap of each rule against the vote and
the evaluator's AUROC on the chains. All three rules generate the same tokens; the evaluator adds
one prompt forward per chain. `seed-tot report POOL RUN...` shows best-of-K beside
self-consistency, and in its plot, once every chain of the pool is rated.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import click

from seed_tot.observe.comparison import (
    SELF_CONSISTENCY_K,
    VALUES_FILE,
    bundled_loader,
    pool_chains,
    pool_problems,
    stored_values,
)
from seed_tot.analysis.reranking import rerank_table
from seed_tot.records import append_json_lines
from seed_tot.search.chains import add_cot_node
from seed_tot.tree import ReasoningTree
from seed_tot_tasks import get_task

def chain_nodes(item):
    """The pool's sampled chains as the best-of-n search hangs them: answer nodes under an empty root."""
    tree = ReasoningTree()
    tree.add_root("")
    return [add_cot_node(tree, item.task, item.problem, result, index, 0)
            for index, result in enumerate(item.samples, 1)]


def score(pool: Path, problems: dict, target_name: str, dtype: str, method: str, per_call: int) -> None:
    from seed_tot.config import DecodeConfig
    from seed_tot.models.loading import load_model
    from seed_tot.reasoning.evaluator import StateEvaluator
    from seed_tot.reasoning.prompting import PromptFormatter
    from seed_tot.scheduling.factory import make_executor

    done = stored_values(pool)
    todo = [pid for pid, item in problems.items()
            if any((pid, i) not in done for i in range(1, len(item.samples) + 1))]
    if not todo:
        return
    target = load_model(target_name, dtype=dtype)
    formatter = PromptFormatter(target.tokenizer)
    executor = make_executor(method, target)
    settings = {"target": target.name, "dtype": str(target.dtype).removeprefix("torch."), "method": method,
                "value_mode": "logits"}
    evaluators = {}
    print(f"rating the chains of {len(todo)} problems with {target.name} ({settings['dtype']}, {method})",
          file=sys.stderr)
    for start in range(0, len(todo), per_call):
        jobs = []
        for pid in todo[start:start + per_call]:
            item = problems[pid]
            evaluator = evaluators.setdefault(item.task.name, StateEvaluator(
                item.task, formatter, DecodeConfig(), 0, mode="logits"))
            nodes = [n for i, n in enumerate(chain_nodes(item), 1) if (pid, i) not in done]
            jobs.append((pid, item, evaluator, nodes, evaluator.requests(item.problem, nodes)))
        started = time.perf_counter()
        results = executor.run([request for *_, requests in jobs for request in requests])
        seconds = time.perf_counter() - started
        rows, at = [], 0
        for pid, item, evaluator, nodes, requests in jobs:
            mine = results[at:at + len(requests)]
            at += len(requests)
            prompts = iter(requests)
            for node, evaluation in zip(nodes, evaluator.read(item.problem, nodes, requests, mine), strict=True):
                rejected = evaluation.rejected is not None
                rows.append({"problem_id": pid, "sample_index": node.info["cot_sample"],
                             "value": None if rejected else evaluation.value, "rejected": evaluation.rejected,
                             "verdict_probs": evaluation.verdict_probs, "verdict_mass": evaluation.verdict_mass,
                             "prompt_tokens": None if rejected else len(next(prompts).prompt_ids),
                             "call_seconds": round(seconds, 3), "settings": settings})
        append_json_lines(pool / VALUES_FILE, rows)
        print(f"problems {start + 1}-{start + len(jobs)} of {len(todo)}: {len(rows)} chains in {seconds:.1f} s",
              file=sys.stderr)
    executor.close()


def rated_problems(pool: Path) -> dict[str, tuple[list, set[str], list[int]]]:
    """Per problem whose every chain has a stored row: [(answer, value)], correct answers, prompt tokens."""
    rows = stored_values(pool)
    return {pid: (list(zip(chains.answers, chains.values)), chains.correct,
                  [rows[(pid, i)].get("prompt_tokens") or 0 for i in range(1, len(chains.answers) + 1)])
            for pid, (_, chains) in pool_chains(pool, get_task, bundled_loader()).items() if chains.values is not None}


@click.command()
@click.argument("pool", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--score", "do_score", is_flag=True, help="Rate the chains that have no stored value first.")
@click.option("--target", default="default-target", show_default=True)
@click.option("--dtype", default="auto", show_default=True)
@click.option("--method", default="batched", show_default=True)
@click.option("--per-call", default=4, show_default=True, help="Problems per executor call.")
def main(pool: Path, do_score: bool, target: str, dtype: str, method: str, per_call: int) -> None:
    if not (pool / "cot_samples.jsonl").is_file():
        raise click.ClickException(f"{pool} holds no cot_samples.jsonl: write one with scripts/add_cot_samples.py.")
    problems = pool_problems(pool, get_task, bundled_loader())
    if do_score:
        score(pool, problems, target, dtype, method, per_call)
    rated = rated_problems(pool)
    if not rated:
        raise click.ClickException(f"No problem of {pool} has all its chains rated: run with --score.")
    click.echo("\n".join(rerank_table(rated, "the logit State Evaluator", SELF_CONSISTENCY_K)))


if __name__ == "__main__":
    main()
