"""`seed-tot fastcot calibrate`: pick FastCoT's iteration cap on a small GSM8K subset
(seed_tot/fastcot_calibration.py does the work; this module reads the options and the data)."""

from __future__ import annotations

import time
from pathlib import Path

import click
import torch

from seed_tot.decoding.fastcot import DEFAULT_TRIGGER
from seed_tot.errors import ConfigError
from seed_tot.fastcot_calibration import choose_cap, compare_fastcot_with_ar, format_table
from seed_tot.records import RecordLog, write_json_atomically


def gsm8k_problems(path: str | None, limit: int):
    """The first `limit` GSM8K problems of `path` (default: the vendored test split)."""
    from seed_tot_tasks.gsm8k import DEFAULT_PATH, Gsm8kTask

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
    from seed_tot_tasks.gsm8k import extract_number_answer

    cap_list = parse_caps(caps)
    if threads:
        torch.set_num_threads(threads)
    task, problems = gsm8k_problems(data, limit)
    target = load_model("tiny-target" if tiny else model, dtype=dtype)
    started = time.perf_counter()
    report = compare_fastcot_with_ar(
        target, problems, task, cap_list, window, max_cot_tokens, max_answer_tokens, trigger, extract_number_answer,
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
