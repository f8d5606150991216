"""Add sampled chains of thought to the trees of a finished run and vote again: what
`--cot-samples K` would have answered on those trees, without searching them again.

    python scripts/add_cot_samples.py runs/quality-gsm8k --samples 4 [--per-call 8]

For every problem in RUN/results.jsonl it sends the sampled CoT requests the search itself
would send (`cot_requests`: same prompt, seeds and settings; the greedy one is already in the
trace), on the run's target with the batched executor, `--per-call` problems per executor
call. The samples join the tree as `cot_sample` nodes and `select_answer` votes. Writes
RUN/cot_samples.jsonl (per problem: sample texts and answers, the old and new final answers)
and prints the accuracy table. In bfloat16 a full run could differ a little: batch shapes
change the numerics, so its trees need not be token-identical to the recorded ones.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from seed_tot.cli.report import problem_of
from seed_tot.models.loading import load_model
from seed_tot.observe.trace import load_trace, tree_from_trace
from seed_tot.reasoning.prompting import PromptFormatter
from seed_tot.scheduling.factory import make_executor
from seed_tot.search import search_class
from seed_tot.search.answers import is_chain_of_thought, select_answer
from seed_tot.search.base import add_cot_node, cot_requests
from tasks import get_task


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path)
    parser.add_argument("--samples", type=int, default=4)
    parser.add_argument("--per-call", type=int, default=8, help="problems per executor call")
    parser.add_argument("--dtype", default="auto", help="the run's --dtype (auto: as the CLI chooses)")
    args = parser.parse_args()
    rows = [json.loads(line) for line in (args.run / "results.jsonl").read_text().splitlines() if line.strip()]
    traces = [load_trace(args.run / "traces" / row["trace_path"].rsplit("/traces/", 1)[-1]) for row in rows]
    task = get_task(traces[0].task)
    bundled = {p.id: p for p in task.load()}
    if any(node.info.get("cot_sample") for trace in traces for node in trace.nodes):
        sys.exit(f"{args.run} already holds sampled chains of thought (a --cot-samples run): nothing to add.")
    target = load_model(traces[0].models["target"], dtype=args.dtype)
    formatter = PromptFormatter(target.tokenizer)
    executor = make_executor("batched", target, None)
    started = time.perf_counter()
    out_rows = []
    for first in range(0, len(traces), args.per_call):
        chunk = traces[first : first + args.per_call]
        per_trace = []
        for trace in chunk:
            config = search_class(trace.search).config_class(**{**trace.config["search"], "cot_samples": args.samples})
            prompt_ids = formatter.encode(task.cot_prompt(problem_of(trace, bundled)))
            per_trace.append((config, cot_requests(prompt_ids, config, trace.problem_id)[1:]))
        results = executor.run([r for _, requests in per_trace for r in requests])
        for trace, (config, requests) in zip(chunk, per_trace, strict=True):
            mine, results = results[: len(requests)], results[len(requests) :]
            out_rows.append(revote(task, problem_of(trace, bundled), trace, config, mine))
        print(f"{len(out_rows)}/{len(traces)} problems, {time.perf_counter() - started:.0f} s", flush=True)
    with (args.run / "cot_samples.jsonl").open("w") as handle:
        for row in out_rows:
            handle.write(json.dumps(row) + "\n")
    n = len(out_rows)
    old = sum(r["old_correct"] for r in out_rows)
    new = sum(r["new_correct"] for r in out_rows)
    cot = sum(r["cot_correct"] for r in out_rows)
    cot_vote = sum(r["cot_vote_correct"] for r in out_rows)
    tokens = sum(r["sample_tokens"] for r in out_rows) / n
    print(f"\n| problems | greedy CoT | final before | final with {args.samples} CoT samples "
          "| the chains' vote alone | sample tokens / problem |")
    print("|---|---|---|---|---|---|")
    print(f"| {n} | {cot}/{n} | {old}/{n} | {new}/{n} | {cot_vote}/{n} | {tokens:.0f} |")
    print(f"wall {time.perf_counter() - started:.0f} s")


def revote(task, problem, trace, config, results) -> dict:
    tree = tree_from_trace(trace)
    nodes = [add_cot_node(tree, task, problem, result, index, config.seed) for index, result in enumerate(results, 1)]
    selection = select_answer(task, problem, tree, trace.chosen_path[-1], vote=config.vote)
    cot_answer = (trace.selection or {}).get("cot_answer")
    # what the chains of thought alone would vote (self-consistency)
    cot_vote = select_answer(task, problem, tree, 0, vote=True, keep=is_chain_of_thought)
    cot_vote_answer = cot_vote.answer if cot_vote.method == "vote" else cot_answer
    return {
        "problem_id": problem.id,
        "gold": problem.gold,
        "samples": [r.text for r in results],
        "finish_reasons": [r.finish_reason for r in results],
        "sample_token_counts": [len(r.token_ids) for r in results],
        "sample_answers": [task.extract_answer(problem, node.state) for node in nodes],
        "sample_tokens": sum(len(r.token_ids) for r in results),
        "votes": selection.votes,
        "old_answer": trace.final_answer,
        "new_answer": selection.answer,
        "cot_correct": task.score(problem, cot_answer) == 1.0,
        "old_correct": task.score(problem, trace.final_answer) == 1.0,
        "new_correct": task.score(problem, selection.answer) == 1.0,
        "cot_vote_answer": cot_vote_answer,
        "cot_vote_correct": task.score(problem, cot_vote_answer) == 1.0,
    }


if __name__ == "__main__":
    main()
