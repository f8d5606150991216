"""`seed-tot fastcot calibrate`: pick FastCoT's iteration cap on a small GSM8K subset.

For each problem, greedy autoregressive chain of thought (AR CoT) gives the reference answer;
FastCoT answers after each candidate cap from one Jacobi trajectory (decoding.fastcot_at_caps).
The smallest cap whose accuracy is at most --max-loss below AR's is chosen.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import click
import torch

from seed_tot.config import DecodeConfig
from seed_tot.decoding.autoregressive import autoregressive_decode
from seed_tot.decoding.fastcot import DEFAULT_TRIGGER, fastcot_at_caps
from seed_tot.errors import ConfigError
from seed_tot.runtime import ModelRunner

COT_INSTRUCTION = "Solve the following math problem step by step.\n\nQuestion: {question}"
FALLBACK_DATA = Path("/work/shared/data/gsm8k/test.jsonl")


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
    """The first `limit` GSM8K problems (vendored data, else the shared copy, else `path`)."""
    from tasks.gsm8k import DEFAULT_PATH, Gsm8kTask

    source = Path(path) if path else (DEFAULT_PATH if DEFAULT_PATH.is_file() else FALLBACK_DATA)
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


@dataclass
class Tally:
    correct: int = 0
    wall_seconds: float = 0.0
    target_forwards: int = 0
    tokens: int = 0
    iterations: int = 0
    exact_tokens: int = 0
    approximate_tokens: int = 0
    answers: list[str | None] = field(default_factory=list)

    def summary(self, count: int) -> dict:
        return {
            "accuracy": self.correct / count,
            "mean_wall_seconds": self.wall_seconds / count,
            "mean_target_forwards": self.target_forwards / count,
            "mean_tokens": self.tokens / count,
            "mean_iterations": self.iterations / count,
            "mean_exact_tokens": self.exact_tokens / count,
            "mean_approximate_tokens": self.approximate_tokens / count,
            "answers": self.answers,
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
) -> dict:
    """Accuracy and cost of AR CoT and of FastCoT at each cap on the same problems."""
    config = DecodeConfig(max_new_tokens=max_cot_tokens)
    ar, per_cap = Tally(), {cap: Tally() for cap in caps}
    from tasks.gsm8k import extract_number_answer

    for index, problem in enumerate(problems):
        prompt = cot_prompt_ids(target, problem.question)
        question = target.encode(problem.question)
        reference = autoregressive_decode(target, prompt, config)
        answer = extract_number_answer(target.decode(reference.token_ids))
        ar.correct += int(task.score(problem, answer))
        ar.wall_seconds += reference.stats.wall_seconds
        ar.target_forwards += reference.stats.target_forwards
        ar.tokens += reference.stats.new_tokens
        ar.answers.append(answer)
        results = fastcot_at_caps(
            target, prompt, config, caps, window=window, trigger=trigger,
            max_answer_tokens=max_answer_tokens, init_ids=question,
        )
        for result in results:
            out, tally = result.output, per_cap[result.cap]
            fast_answer = extract_number_answer(target.decode(out.trigger_ids + out.answer_ids))
            tally.correct += int(task.score(problem, fast_answer))
            tally.wall_seconds += result.wall_seconds
            tally.target_forwards += out.stats.target_forwards
            tally.tokens += out.stats.new_tokens
            tally.iterations += out.iterations
            tally.exact_tokens += len(out.exact_ids)
            tally.approximate_tokens += len(out.approximate_ids)
            tally.answers.append(fast_answer)
        if progress is not None:
            progress(index + 1, len(problems))
    count = max(len(problems), 1)
    return {
        "problems": [p.id for p in problems],
        "golds": [p.gold for p in problems],
        "ar": ar.summary(count),
        "fastcot": {str(cap): per_cap[cap].summary(count) for cap in caps},
    }


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


def write_json_atomically(path: Path, payload: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    with os.fdopen(handle, "w") as stream:
        json.dump(payload, stream, indent=2)
    os.replace(temp, path)


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
def calibrate(caps, limit, max_loss, window, max_cot_tokens, max_answer_tokens, trigger, model, tiny, dtype,
              threads, data, output) -> None:
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
