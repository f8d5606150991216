"""`seed-tot fastcot calibrate`: pick FastCoT's iteration cap on a small GSM8K subset.

For each problem, greedy autoregressive chain of thought (AR CoT) gives the reference answer;
FastCoT answers after each candidate cap from one Jacobi trajectory (decoding.fastcot_at_caps).
The smallest cap whose accuracy is at most --max-loss below AR's is chosen.
"""

from __future__ import annotations

import time
from pathlib import Path

import click
import torch

from seed_tot.config import DecodeConfig
from seed_tot.decoding.autoregressive import autoregressive_decode
from seed_tot.decoding.fastcot import DEFAULT_TRIGGER, fastcot_at_caps
from seed_tot.errors import ConfigError
from seed_tot.records import RecordLog, settings_key, write_json_atomically
from seed_tot.runtime import ModelRunner

COT_INSTRUCTION = "Solve the following math problem step by step.\n\nQuestion: {question}"


def cot_prompt_ids(runner: ModelRunner, question: str) -> list[int]:
    """The chain-of-thought prompt: the chat template when the tokenizer has one, else plain text."""
    message = COT_INSTRUCTION.format(question=question)
    tokenizer = runner.tokenizer
    if tokenizer is not None and getattr(tokenizer, "chat_template", None):
        text = tokenizer.apply_chat_template(
            [{"role": "user", "content": message}], tokenize=False, add_generation_prompt=True
        )
        return runner.encode(text)
    return runner.encode(message + "\nAnswer: Let's think step by step.\n")


def gsm8k_problems(path: str | None, limit: int):
    """The first `limit` GSM8K problems of `path` (default: the vendored test split)."""
    from tasks.gsm8k import DEFAULT_PATH, Gsm8kTask

    source = Path(path) if path else DEFAULT_PATH
    if not source.is_file():
        raise ConfigError(f"GSM8K data {source} does not exist: pass --data with a GSM8K test.jsonl file.")
    return Gsm8kTask(), Gsm8kTask().load(source)[:limit]


def parse_caps(text: str) -> list[int]:
    try:
        caps = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        caps = []
    if not caps or caps[0] < 1:
        raise ConfigError(f"Bad --caps {text!r}: give comma-separated positive integers such as 4,8,16,32.")
    return caps


SUMMED = ("wall_seconds", "target_forwards", "tokens", "iterations", "exact_tokens", "approximate_tokens")


def summarize_method(rows: list[dict]) -> dict:
    """Accuracy, per-problem means and answers of one method over its per-problem rows."""
    count = max(len(rows), 1)
    summary = {"accuracy": sum(row["correct"] for row in rows) / count}
    for name in SUMMED:
        summary[f"mean_{name}"] = sum(row.get(name, 0) for row in rows) / count
    summary["answers"] = [row["answer"] for row in rows]
    return summary


def fastcot_problem_record(
    target: ModelRunner, problem, task, caps: list[int], window: int, max_cot_tokens: int,
    max_answer_tokens: int, trigger: str,
) -> dict:
    """AR CoT and FastCoT at each cap (one Jacobi trajectory) on one problem: answers, correctness, cost."""
    from tasks.gsm8k import extract_number_answer

    config = DecodeConfig(max_new_tokens=max_cot_tokens)
    prompt = cot_prompt_ids(target, problem.question)
    reference = autoregressive_decode(target, prompt, config)
    answer = extract_number_answer(target.decode(reference.token_ids))
    record = {
        "id": problem.id,
        "gold": problem.gold,
        "ar": {
            "correct": int(task.score(problem, answer)),
            "answer": answer,
            "wall_seconds": reference.stats.wall_seconds,
            "target_forwards": reference.stats.target_forwards,
            "tokens": reference.stats.new_tokens,
            "exact_tokens": reference.stats.new_tokens,
        },
        "caps": {},
    }
    results = fastcot_at_caps(
        target, prompt, config, caps, window=window, trigger=trigger,
        max_answer_tokens=max_answer_tokens, init_ids=target.encode(problem.question),
    )
    for result in results:
        out = result.output
        fast_answer = extract_number_answer(target.decode(out.trigger_ids + out.answer_ids))
        record["caps"][str(result.cap)] = {
            "correct": int(task.score(problem, fast_answer)),
            "answer": fast_answer,
            "wall_seconds": result.wall_seconds,
            "target_forwards": out.stats.target_forwards,
            "tokens": out.stats.new_tokens,
            "iterations": out.iterations,
            "exact_tokens": len(out.exact_ids),
            "approximate_tokens": len(out.approximate_ids),
        }
    return record


def summarize_fastcot(records: list[dict], caps: list[int]) -> dict:
    """The comparison report of AR CoT and FastCoT at each cap over per-problem records."""
    return {
        "problems": [r["id"] for r in records],
        "golds": [r["gold"] for r in records],
        "ar": summarize_method([r["ar"] for r in records]),
        "fastcot": {str(cap): summarize_method([r["caps"][str(cap)] for r in records]) for cap in caps},
    }


def compare_fastcot_with_ar(
    target: ModelRunner,
    problems: list,
    task,
    caps: list[int],
    window: int,
    max_cot_tokens: int,
    max_answer_tokens: int,
    trigger: str,
    progress=None,
    log: RecordLog | None = None,
) -> dict:
    """Accuracy and cost of AR CoT and of FastCoT at each cap on the same problems.

    With a RecordLog, problems already recorded under the same settings are not recomputed
    and each finished problem is recorded at once, so an interrupted run resumes where it stopped.
    """
    log = log if log is not None else RecordLog(None)
    settings = {"model": target.name, "dtype": str(target.dtype), "caps": caps, "window": window,
                "max_cot_tokens": max_cot_tokens, "max_answer_tokens": max_answer_tokens, "trigger": trigger}
    records = []
    for index, problem in enumerate(problems):
        records.append(log.get_or_compute(settings_key(f"fastcot/{problem.id}", settings), lambda: fastcot_problem_record(
            target, problem, task, caps, window, max_cot_tokens, max_answer_tokens, trigger)))
        if progress is not None:
            progress(index + 1, len(problems))
    return summarize_fastcot(records, caps)


def choose_cap(report: dict, max_loss: float) -> int | None:
    """The smallest cap whose accuracy is at most `max_loss` below AR's (None if no cap qualifies)."""
    ar_accuracy = report["ar"]["accuracy"]
    for cap in sorted(int(c) for c in report["fastcot"]):
        if ar_accuracy - report["fastcot"][str(cap)]["accuracy"] <= max_loss + 1e-12:
            return cap
    return None


def format_table(report: dict) -> str:
    ar = report["ar"]
    lines = [
        f"{'method':<14}{'accuracy':>9}{'loss':>8}{'wall s':>9}{'forwards':>10}{'iters':>7}{'exact':>7}{'approx':>8}",
        f"{'AR CoT':<14}{ar['accuracy']:>9.3f}{0.0:>8.3f}{ar['mean_wall_seconds']:>9.2f}"
        f"{ar['mean_target_forwards']:>10.1f}{'-':>7}{ar['mean_tokens']:>7.1f}{'-':>8}",
    ]
    for cap, row in sorted(report["fastcot"].items(), key=lambda item: int(item[0])):
        lines.append(
            f"{'FastCoT cap ' + cap:<14}{row['accuracy']:>9.3f}{ar['accuracy'] - row['accuracy']:>8.3f}"
            f"{row['mean_wall_seconds']:>9.2f}{row['mean_target_forwards']:>10.1f}{row['mean_iterations']:>7.1f}"
            f"{row['mean_exact_tokens']:>7.1f}{row['mean_approximate_tokens']:>8.1f}"
        )
    return "\n".join(lines)


@click.group()
def fastcot() -> None:
    """FastCoT (Jacobi window + early answer): calibration of the iteration cap."""


@fastcot.command()
@click.option("--caps", default="4,8,16,32", show_default=True, help="Candidate iteration caps.")
@click.option("--limit", default=20, show_default=True, type=click.IntRange(1), help="GSM8K problems to use.")
@click.option("--max-loss", default=0.02, show_default=True, type=float, help="Largest accuracy loss vs AR.")
@click.option("--window", default=8, show_default=True, type=click.IntRange(0), help="Jacobi window (approximate tokens).")
@click.option("--max-cot-tokens", default=256, show_default=True, type=click.IntRange(1), help="Chain-of-thought budget.")
@click.option("--max-answer-tokens", default=16, show_default=True, type=click.IntRange(1))
@click.option("--trigger", default=DEFAULT_TRIGGER, show_default=True, help="Answer trigger appended before the answer.")
@click.option("--model", default="default-target", show_default=True, help="Model alias, directory, .gguf or hub id.")
@click.option("--tiny", is_flag=True, help="Use the tiny in-process model (a smoke run; accuracy is meaningless).")
@click.option("--dtype", default="auto", show_default=True)
@click.option("--threads", default=None, type=click.IntRange(1), help="torch threads (default: torch's choice).")
@click.option("--data", default=None, help="GSM8K jsonl (default: the vendored test set).")
@click.option("--output", default="fastcot_calibration.json", show_default=True, type=click.Path(dir_okay=False))
@click.option("--records", default=None, type=click.Path(dir_okay=False),
              help="JSON-lines log of finished problems; a rerun with the same file resumes (default: OUTPUT.records.jsonl).")
def calibrate(caps, limit, max_loss, window, max_cot_tokens, max_answer_tokens, trigger, model, tiny, dtype,
              threads, data, output, records) -> None:
    """Run AR CoT and FastCoT at each cap on GSM8K; choose the smallest cap within --max-loss."""
    from seed_tot.models import load_model

    cap_list = parse_caps(caps)
    if threads:
        torch.set_num_threads(threads)
    task, problems = gsm8k_problems(data, limit)
    target = load_model("tiny-target" if tiny else model, dtype=dtype)
    started = time.perf_counter()
    report = compare_fastcot_with_ar(
        target, problems, task, cap_list, window, max_cot_tokens, max_answer_tokens, trigger,
        progress=lambda done, total: click.echo(f"  {done}/{total} problems", err=True),
        log=RecordLog(records or f"{output}.records.jsonl"),
    )
    chosen = choose_cap(report, max_loss)
    report.update(
        model=target.name, window=window, max_cot_tokens=max_cot_tokens, max_answer_tokens=max_answer_tokens,
        trigger=trigger, max_loss=max_loss, chosen_cap=chosen, wall_seconds=time.perf_counter() - started,
    )
    write_json_atomically(Path(output), report)
    click.echo(format_table(report))
    if chosen is None:
        click.echo(f"No cap keeps the accuracy loss within {max_loss}: try larger caps. Wrote {output}.")
    else:
        click.echo(f"Chosen cap: {chosen} (accuracy loss <= {max_loss}). Wrote {output}.")
