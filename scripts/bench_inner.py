"""Benchmark the inner (per-node) decoders on the real default target, greedy, GSM8K prompts.

Part 1: AR vs lookahead vs Jacobi on the same chat-template GSM8K prompts (tokens/s, target
forwards per token, agreement with AR). Methods run one after another per prompt, so the
ratios are measured side by side on this shared machine.
Part 2: FastCoT (several caps from one Jacobi trajectory, plus the convergence check) vs AR
chain of thought: accuracy and wall time.

    python scripts/bench_inner.py --prompts 4 --max-new-tokens 128 --fastcot-problems 8
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from types import SimpleNamespace

import click
import torch

from seed_tot.config import DecodeConfig
from seed_tot.decoding.autoregressive import autoregressive_decode
from seed_tot.decoding.fastcot import DEFAULT_TRIGGER, fastcot_decode
from seed_tot.decoding.jacobi import jacobi_decode
from seed_tot.decoding.lookahead import lookahead_decode
from seed_tot.fastcot_calibration import compare_fastcot_with_ar, cot_prompt_ids, format_table
from seed_tot.models import load_model
from seed_tot.records import RecordLog, settings_key, write_json_atomically
from seed_tot_tasks.gsm8k import Gsm8kTask, extract_number_answer


def forward_costs(target, widths: list[int], rounds: int = 3, context: int = 200) -> dict[int, float]:
    """Median seconds of one forward over q new tokens after a `context`-token cache, rounds interleaved."""
    from statistics import median

    from seed_tot.runtime import rollback

    vocab = min(target.vocab_size, 1000)
    _, cache = target.prefill([(7 * i) % vocab for i in range(context)])
    times: dict[int, list[float]] = {q: [] for q in widths}
    for _ in range(rounds):
        for q in widths:
            started = time.perf_counter()
            target.forward(torch.tensor([[(11 * i) % vocab for i in range(q)]]), cache)
            times[q].append(time.perf_counter() - started)
            rollback(cache, context)
    return {q: median(ts) for q, ts in times.items()}


def top2_gap(target, context: list[int]) -> float:
    """Logit gap between the two most likely next tokens (small = a near-tie)."""
    logits = target.forward(torch.tensor([context]), logits_to_keep=1)[0, -1]
    top = logits.topk(2).values
    return float(top[0] - top[1])


def agreement(target, prompt: list[int], reference: list[int], tokens: list[int]) -> dict:
    """How far a decoder's greedy output agrees with AR; at a divergence, AR's top-2 logit gap there."""
    same = 0
    while same < min(len(reference), len(tokens)) and reference[same] == tokens[same]:
        same += 1
    identical = tokens == reference
    row = {"identical": identical, "agree_prefix": same}
    if not identical and same < min(len(reference), len(tokens)):
        row["top2_gap_at_divergence"] = top2_gap(target, prompt + reference[:same])
    return row


def inner_methods(target, args) -> list[tuple[str, object]]:
    config = DecodeConfig(max_new_tokens=args.max_new_tokens)
    methods = [("AR", lambda p: autoregressive_decode(target, p, config))]
    for setting in args.lookahead.split(";"):
        w, n, g = (int(x) for x in setting.split(","))
        methods.append((f"lookahead W={w} N={n} G={g}", lambda p, w=w, n=n, g=g: lookahead_decode(
            target, p, config, window=w, ngram=n, candidates=g)))
    for block in (int(b) for b in args.jacobi_blocks.split(",") if b):
        methods.append((f"Jacobi block={block}", lambda p, b=block: jacobi_decode(target, p, config, block_size=b)))
    return methods


def inner_prompt_rows(target, methods, index: int, problem, rotate: bool) -> list[dict]:
    """Every method on one prompt, one after another; one row per method."""
    prompt = cot_prompt_ids(target, problem.question)
    # Rotate the order per prompt so a drift of the shared machine's load hits every method alike.
    shift = index % len(methods) if rotate else 0
    outputs = {}
    for name, decode in methods[shift:] + methods[:shift]:
        outputs[name] = decode(prompt)
    reference = outputs["AR"].token_ids
    rows = []
    for name, _ in methods:
        out = outputs[name]
        row = {"prompt": index, "problem": problem.id, "method": name, **out.stats.as_dict()}
        row.update(agreement(target, prompt, reference, out.token_ids))
        rows.append(row)
        print(f"  prompt {index} {name}: {out.stats.new_tokens} tokens, {out.stats.wall_seconds:.1f} s, "
              f"{out.stats.target_forwards} forwards, identical={row['identical']}", file=sys.stderr)
    return rows


def run_inner(target, problems, args, log: RecordLog) -> list[dict]:
    methods = inner_methods(target, args)
    settings = {"model": target.name, "dtype": str(target.dtype), "max_new_tokens": args.max_new_tokens,
                "methods": [name for name, _ in methods], "rotate": args.rotate}
    rows = []
    for index, problem in enumerate(problems):
        key = settings_key(f"inner/{index}/{problem.id}", settings)
        record = log.get_or_compute(
            key, lambda: {"rows": inner_prompt_rows(target, methods, index, problem, args.rotate)}
        )
        rows += record["rows"]
    return rows


def summarise_inner(rows: list[dict]) -> str:
    """Aggregate tokens/s (total tokens / total seconds), the median of per-prompt speed ratios,
    and how outputs compare with AR (a divergence is reported with AR's top-2 logit gap there)."""
    lines = ["| method | tokens | wall s | tokens/s | speed vs AR | median per-prompt ratio | target forwards / token "
             "| identical to AR | largest top-2 gap at a divergence |", "|---|---|---|---|---|---|---|---|---|"]
    ar_by_prompt = {r["prompt"]: r for r in rows if r["method"] == "AR"}
    ar_rate = sum(r["new_tokens"] for r in ar_by_prompt.values()) / sum(r["wall_seconds"] for r in ar_by_prompt.values())
    for name in dict.fromkeys(r["method"] for r in rows):
        mine = [r for r in rows if r["method"] == name]
        tokens, wall = sum(r["new_tokens"] for r in mine), sum(r["wall_seconds"] for r in mine)
        forwards = sum(r["target_forwards"] for r in mine)
        ratios = [(r["new_tokens"] / r["wall_seconds"]) / (ar_by_prompt[r["prompt"]]["new_tokens"]
                                                         / ar_by_prompt[r["prompt"]]["wall_seconds"]) for r in mine]
        gaps = [r["top2_gap_at_divergence"] for r in mine if r.get("top2_gap_at_divergence") is not None]
        lines.append(f"| {name} | {tokens} | {wall:.1f} | {tokens / wall:.2f} | {tokens / wall / ar_rate:.2f}x | "
                     f"{statistics.median(ratios):.2f}x | {forwards / tokens:.3f} | "
                     f"{sum(r['identical'] for r in mine)}/{len(mine)} | {max(gaps) if gaps else '-'} |")
    return "\n".join(lines)


def convergence_record(target, problem, task, args, cap: int) -> dict:
    """FastCoT with the per-instance convergence check on one problem."""
    out = fastcot_decode(
        target, cot_prompt_ids(target, problem.question), DecodeConfig(max_new_tokens=args.cot_max_tokens),
        window=args.fastcot_window, max_iterations=cap, trigger=DEFAULT_TRIGGER,
        max_answer_tokens=args.max_answer_tokens, check_every=args.check_every,
        check_answer_tokens=args.check_answer_tokens, init_ids=target.encode(problem.question),
    )
    answer = extract_number_answer(target.decode(out.trigger_ids + out.answer_ids))
    return {"correct": int(task.score(problem, answer)), "answer": answer, "wall_seconds": out.stats.wall_seconds,
            "iterations": out.iterations, "converged": out.stopped_by == "converged"}


def run_convergence(target, problems, task, args, log: RecordLog) -> dict:
    """FastCoT with the per-instance convergence check, capped at the largest cap."""
    cap = max(int(c) for c in args.fastcot_caps.split(","))
    settings = {"model": target.name, "dtype": str(target.dtype), "cap": cap, "window": args.fastcot_window,
                "check_every": args.check_every, "check_answer_tokens": args.check_answer_tokens, "cot_max_tokens": args.cot_max_tokens,
                "max_answer_tokens": args.max_answer_tokens}
    records = [
        log.get_or_compute(settings_key(f"convergence/{p.id}", settings),
                           lambda p=p: convergence_record(target, p, task, args, cap))
        for p in problems
    ]
    count = max(len(records), 1)
    return {"check_every": args.check_every, "cap": cap, "accuracy": sum(r["correct"] for r in records) / count,
            "mean_wall_seconds": sum(r["wall_seconds"] for r in records) / count,
            "mean_iterations": sum(r["iterations"] for r in records) / count,
            "converged": sum(r["converged"] for r in records), "answers": [r["answer"] for r in records]}


@click.command(help=__doc__)
@click.option("--model", default="default-target", show_default=True)
@click.option("--tiny", is_flag=True, help="tiny in-process model (smoke run)")
@click.option("--dtype", default="bfloat16", show_default=True)
@click.option("--threads", default=2, show_default=True)
@click.option("--prompts", default=4, show_default=True, help="GSM8K prompts for part 1 (0 skips it)")
@click.option("--max-new-tokens", default=128, show_default=True)
@click.option("--lookahead", default="4,3,4;7,4,7", show_default=True, help="W,N,G settings separated by ';'")
@click.option("--jacobi-blocks", default="4,8", show_default=True)
@click.option("--rotate/--no-rotate", default=True, show_default=True,
              help="rotate the method order per prompt (cancels load drift)")
@click.option("--fastcot-problems", default=8, show_default=True, help="GSM8K problems for part 2 (0 skips it)")
@click.option("--fastcot-offset", default=0, show_default=True, help="skip this many problems first")
@click.option("--fastcot-window", default=8, show_default=True)
@click.option("--fastcot-caps", default="8,16,32", show_default=True)
@click.option("--check-every", default=4, show_default=True, help="convergence-check interval (0: off)")
@click.option("--check-answer-tokens", default=6, show_default=True)
@click.option("--check-problems", type=int, default=None,
              help="run the convergence check on the first this many FastCoT problems (default: all)")
@click.option("--cot-max-tokens", default=256, show_default=True)
@click.option("--max-answer-tokens", default=16, show_default=True)
@click.option("--forward-widths", default="1,5,9,17", show_default=True, help="forward cost per width ('' skips)")
@click.option("--output", default="bench_inner.json", show_default=True)
@click.option("--records", default=None,
              help="JSON-lines log of finished prompts/problems; a rerun with the same file resumes "
                   "(default: OUTPUT.records.jsonl)")
def main(**options) -> None:
    # in the order declared (click hands them over in command-line order): the report records them
    args = SimpleNamespace(**{p.name: options[p.name] for p in click.get_current_context().command.params})
    torch.set_num_threads(args.threads)
    target = load_model("tiny-target" if args.tiny else args.model, dtype="float32" if args.tiny else args.dtype)
    task = Gsm8kTask()
    problems = task.load()[: args.fastcot_offset + max(args.prompts, args.fastcot_problems)]  # the bundled test split
    report: dict = {"args": vars(args), "model": target.name, "dtype": str(target.dtype)}
    log = RecordLog(args.records or f"{args.output}.records.jsonl")
    started = time.perf_counter()
    if args.forward_widths:
        costs = forward_costs(target, [int(q) for q in args.forward_widths.split(",")])
        report["forward_seconds_by_width"] = costs
        print("forward cost (median s) by new tokens per forward:", {q: round(c, 3) for q, c in costs.items()})
    if args.prompts:
        rows = run_inner(target, problems[: args.prompts], args, log)
        report["inner"] = rows
        table = summarise_inner(rows)
        report["inner_table"] = table
        print(table)
    if args.fastcot_problems:
        subset = problems[args.fastcot_offset : args.fastcot_offset + args.fastcot_problems]
        caps = [int(c) for c in args.fastcot_caps.split(",")]
        fast = compare_fastcot_with_ar(
            target, subset, task, caps, args.fastcot_window, args.cot_max_tokens, args.max_answer_tokens,
            DEFAULT_TRIGGER, extract_number_answer,
            progress=lambda done, total: print(f"  FastCoT {done}/{total}", file=sys.stderr),
            log=log,
        )
        report["fastcot"] = fast
        print(format_table(fast))
        if args.check_every:
            report["fastcot_convergence"] = run_convergence(target, subset[: args.check_problems], task, args, log)
            print("convergence check:", json.dumps(report["fastcot_convergence"]))
    report["wall_seconds"] = time.perf_counter() - started
    write_json_atomically(args.output, report)
    print(f"wrote {args.output} ({report['wall_seconds']:.0f} s)")


if __name__ == "__main__":
    main()
