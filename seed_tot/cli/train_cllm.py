"""`seed-tot train cllm`: collect the model's Jacobi trajectories on GSM8K questions (or given prompts), then fine-tune it."""

from __future__ import annotations

import json
import time
from pathlib import Path

import click

from seed_tot.errors import ConfigError

EVALUATION_ROWS = 300  # GSM8K test rows 1-300 are kept for evaluation: never trained on


def parse_rows(text: str) -> tuple[int, int]:
    first, sep, last = text.partition("-")
    try:
        rows = (int(first), int(last) if sep else int(first))
    except ValueError:
        rows = (0, 0)
    if rows[0] < 1 or rows[1] < rows[0]:
        raise ConfigError(f"Bad --rows {text!r}: give a 1-based line range such as 301-1319.")
    if rows[0] <= EVALUATION_ROWS:
        raise ConfigError(f"--rows {text} includes rows 1-{EVALUATION_ROWS}, kept for evaluation: start at {EVALUATION_ROWS + 1} or later.")
    return rows


def training_prompts(runner, data: str | None, rows: tuple[int, int], limit: int | None) -> list[tuple[str, list[int]]]:
    from seed_tot.fastcot_calibration import cot_prompt_ids
    from seed_tot_tasks.gsm8k import DEFAULT_PATH, Gsm8kTask

    problems = [p for p in Gsm8kTask().load(Path(data) if data else DEFAULT_PATH) if rows[0] <= p.meta["line"] <= rows[1]]
    return [(f"gsm8k:{p.meta['line']}", cot_prompt_ids(runner, p.question)) for p in problems[:limit]]


def file_prompts(runner, path: str, limit: int | None) -> list[tuple[str, list[int]]]:
    """Prompts from a JSONL file of {"id": ..., "prompt": ...} rows, encoded verbatim (no template)."""
    prompts = []
    for number, line in enumerate(Path(path).read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            prompts.append((str(row["id"]), runner.encode(row["prompt"])))
        except (ValueError, KeyError, TypeError) as exc:
            raise ConfigError(f"{path}, line {number}: expected a JSON object with 'id' and 'prompt' ({exc}).") from exc
    return prompts[:limit]


def output_dir(out: str | None, model: str) -> Path:
    from seed_tot.models.checkpoints import checkpoints_root

    if out is None:
        return checkpoints_root() / f"cllm-{Path(model).name}"
    return Path(out).expanduser() if ("/" in out or out.startswith(".")) else checkpoints_root() / out


@click.command()
@click.option("--model", default="default-draft", show_default=True, help="Base model (alias, local dir or hub id; tiny for a smoke test).")
@click.option("--out", default=None, help="Checkpoint name (under the checkpoint cache) or directory; default cllm-<model>.")
@click.option("--data", default=None, help="GSM8K jsonl (default: the bundled test split).")
@click.option("--rows", default="301-1319", show_default=True, help="1-based rows of --data whose questions are the training prompts.")
@click.option("--prompts", "prompts_file", default=None, help="JSONL of {\"id\", \"prompt\"} rows to use instead of GSM8K (prompt text encoded as is, no template).")
@click.option("--limit", type=int, default=None, help="Use only the first LIMIT prompts of --rows (or --prompts).")
@click.option("--block-size", type=int, default=16, show_default=True, help="Jacobi block n (tokens per block).")
@click.option("--max-new-tokens", type=int, default=256, show_default=True, help="Tokens generated per prompt.")
@click.option("--steps", type=int, default=200, show_default=True, help="Training steps (one block each).")
@click.option("--lr", type=float, default=None, help="Learning rate (default 2e-4 with LoRA, 2e-5 full).")
@click.option("--full", is_flag=True, help="Fine-tune every weight instead of a LoRA adapter (small models: ~16 bytes per parameter).")
@click.option("--lora-r", type=int, default=16, show_default=True)
@click.option("--lora-alpha", type=int, default=32, show_default=True)
@click.option("--ar-weight", type=float, default=10.0, show_default=True, help="Weight of the AR loss against the consistency loss.")
@click.option("--collect-only", is_flag=True, help="Stop after collecting the trajectories.")
@click.option("--threads", type=int, default=None, help="torch threads (default: all cores).")
@click.option("--seed", type=int, default=0, show_default=True)
def cllm(model, out, data, rows, prompts_file, limit, block_size, max_new_tokens, steps, lr, full, lora_r, lora_alpha, ar_weight, collect_only, threads, seed):
    """CLLM: record the model's greedy Jacobi trajectories (<out>/trajectories.jsonl), then train it
    with the consistency + AR loss. Both stages resume where a previous run with the same --out stopped."""
    import torch

    from seed_tot.models.loading import load_model
    from seed_tot.training.cllm_collect import collect_to_file
    from seed_tot.training.cllm_metrics import summarize
    from seed_tot.training.cllm_train import TrainSettings, train_cllm

    if threads:
        torch.set_num_threads(threads)
    row_range = parse_rows(rows)
    if block_size < 2 or max_new_tokens < 1 or steps < 0:
        raise ConfigError("Give --block-size of 2 or more, --max-new-tokens of 1 or more and --steps of 0 or more.")
    directory = output_dir(out, model)
    runner = load_model(model, dtype="float32", device="cpu")
    if prompts_file:
        prompts = file_prompts(runner, prompts_file, limit)
    else:
        prompts = training_prompts(runner, data, row_range, limit)
    if not prompts:
        raise ConfigError(f"No prompts in {prompts_file}." if prompts_file else f"No GSM8K rows in {rows}: the data has fewer lines.")
    started = time.perf_counter()
    blocks = collect_to_file(runner, prompts, directory / "trajectories.jsonl", block_size, max_new_tokens)
    counts = summarize(blocks)
    click.echo(f"{len(blocks)} blocks from {len(prompts)} prompts: {counts['tokens']} tokens in {counts['forwards']} Jacobi "
               f"forwards ({counts['tokens_per_forward']:.3f} tokens per forward), {time.perf_counter() - started:.0f} s")
    if collect_only:
        return
    settings = TrainSettings(steps=steps, lr=lr or (2e-5 if full else 2e-4), lora=not full, lora_r=lora_r,
                             lora_alpha=lora_alpha, ar_weight=ar_weight, seed=seed)
    meta = {"method": "cllm", "base_model": model, "block_size": block_size, "max_new_tokens": max_new_tokens,
            "rows": None if prompts_file else rows, "prompts_file": prompts_file, "prompts": len(prompts), "blocks": len(blocks), "dtype": "float32"}
    started = time.perf_counter()
    train_cllm(runner.model, blocks, directory, settings, meta)
    click.echo(f"trained {steps} steps in {time.perf_counter() - started:.0f} s: checkpoint {directory} "
               f"(use --method cllm --method-option checkpoint={directory})")
    (directory / "command.json").write_text(json.dumps({"settings": meta | {"steps": steps, "lr": settings.lr, "lora": settings.lora}}, indent=1) + "\n")
