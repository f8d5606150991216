"""FastCoT calibration: pick the iteration cap on a small problem subset (`seed-tot fastcot calibrate`).

For each problem, greedy autoregressive chain of thought (AR CoT) gives the reference answer;
FastCoT answers after each candidate cap from one Jacobi trajectory (decoding.fastcot_at_caps).
The smallest cap whose accuracy is at most `max_loss` below AR's is chosen. Finished problems go
to a RecordLog, so an interrupted calibration resumes where it stopped.
"""

from __future__ import annotations

from collections.abc import Callable

from seed_tot.config import DecodeConfig
from seed_tot.decoding.autoregressive import autoregressive_decode
from seed_tot.decoding.fastcot import fastcot_at_caps
from seed_tot.records import RecordLog, settings_key
from seed_tot.runtime import ModelRunner
from seed_tot.task import Problem, Task

AnswerReader = Callable[[str], "str | None"]  # generated text -> the answer in it

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
    target: ModelRunner, problem: Problem, task: Task, caps: list[int], window: int, max_cot_tokens: int,
    max_answer_tokens: int, trigger: str, extract_answer: AnswerReader,
) -> dict:
    """AR CoT and FastCoT at each cap (one Jacobi trajectory) on one problem: answers, correctness, cost."""
    config = DecodeConfig(max_new_tokens=max_cot_tokens)
    prompt = cot_prompt_ids(target, problem.question)
    reference = autoregressive_decode(target, prompt, config)
    answer = extract_answer(target.decode(reference.token_ids))
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
        fast_answer = extract_answer(target.decode(out.trigger_ids + out.answer_ids))
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
    problems: list[Problem],
    task: Task,
    caps: list[int],
    window: int,
    max_cot_tokens: int,
    max_answer_tokens: int,
    trigger: str,
    extract_answer: AnswerReader,
    progress=None,
    log: RecordLog | None = None,
) -> dict:
    """Accuracy and cost of AR CoT and of FastCoT at each cap on the same problems; answers are
    read from the generated text by `extract_answer` (GSM8K: the declared or last number).

    With a RecordLog, problems already recorded under the same settings are not recomputed
    and each finished problem is recorded at once, so an interrupted run resumes where it stopped.
    """
    log = log if log is not None else RecordLog(None)
    settings = {"model": target.name, "dtype": str(target.dtype), "caps": caps, "window": window,
                "max_cot_tokens": max_cot_tokens, "max_answer_tokens": max_answer_tokens, "trigger": trigger}
    records = []
    for index, problem in enumerate(problems):
        records.append(log.get_or_compute(settings_key(f"fastcot/{problem.id}", settings), lambda: fastcot_problem_record(
            target, problem, task, caps, window, max_cot_tokens, max_answer_tokens, trigger, extract_answer)))
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
