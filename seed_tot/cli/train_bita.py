"""`seed-tot train bita`: collect the frozen model's greedy outputs for GSM8K training prompts,
then train BiTA's prompt and mask tokens on them. Rerunning the same command resumes both."""

from __future__ import annotations

import gc
import sys
from pathlib import Path

import click
from tqdm import tqdm

from seed_tot.errors import ConfigError

EVALUATION_ROWS = 300  # GSM8K test rows 1-300 are kept for evaluation and never trained on


@click.command("bita")
@click.option("--model", default="default-draft", show_default=True, help="The frozen model to accelerate (alias, local dir, .gguf or hub id).")
@click.option("--tiny", is_flag=True, help="Use the tiny in-process random-weight model (a smoke test of the pipeline).")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), required=True, help="Run directory: samples.jsonl, bita.safetensors, train_state.safetensors, log.jsonl.")
@click.option("--data", "data_path", type=click.Path(dir_okay=False), default=None, help="GSM8K jsonl (default: the vendored test split).")
@click.option("--start", type=int, default=EVALUATION_ROWS, show_default=True, help="Index of the first training question (0-based; rows 1-300 are refused).")
@click.option("--prompts", "n_prompts", type=int, default=128, show_default=True, help="Training questions (from --start on).")
@click.option("--max-new-tokens", type=int, default=192, show_default=True, help="Length of each collected greedy continuation.")
@click.option("--collect-batch", type=int, default=8, show_default=True, help="Prompts decoded together while collecting.")
@click.option("--collect-dtype", default="auto", show_default=True, help="dtype of the model while collecting (the dtype it will decode in).")
@click.option("--train-dtype", default="float32", show_default=True, help="dtype of the frozen model while training (the parameters are float32).")
@click.option("--steps", type=int, default=300, show_default=True, help="Training steps (one sample each); more steps on a finished run continue it.")
@click.option("--lr", type=float, default=1e-2, show_default=True, help="Adam learning rate (linear warm-up, cosine decay).")
@click.option("--warmup", type=int, default=10, show_default=True, help="Steps of linear learning-rate warm-up.")
@click.option("--groups", type=int, default=32, show_default=True, help="Mask groups per sample and step.")
@click.option("--prefix", "prefix_len", type=int, default=16, show_default=True, help="Prompt tokens (prefix key/values per layer).")
@click.option("--masks", type=int, default=3, show_default=True, help="Mask tokens (future tokens drafted per forward).")
@click.option("--init", type=click.Choice(["tokens", "random"]), default="tokens", show_default=True, help="Initial prefix: a neutral text's key/values, or seeded noise.")
@click.option("--save-every", type=int, default=25, show_default=True, help="Checkpoint every this many steps.")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--threads", type=int, default=None, help="torch threads (default: all cores).")
def bita(model, tiny, out_dir, data_path, start, n_prompts, max_new_tokens, collect_batch, collect_dtype, train_dtype,
         steps, lr, warmup, groups, prefix_len, masks, init, save_every, seed, threads):
    """Self-distillation training of BiTA on the model's own greedy GSM8K outputs (only the prompt
    and mask tokens are trained; the model stays frozen)."""
    import torch

    from seed_tot.training.bita.trainer import PARAMS_FILE, TrainSettings

    if start < EVALUATION_ROWS and data_path is None:
        raise ConfigError(f"--start {start} would train on GSM8K rows 1-{EVALUATION_ROWS}, which are kept for evaluation: use --start {EVALUATION_ROWS} or more.")
    if n_prompts < 1 or max_new_tokens < 4 or collect_batch < 1:
        raise ConfigError("--prompts and --collect-batch must be at least 1 and --max-new-tokens at least 4.")
    settings = TrainSettings(steps=steps, lr=lr, warmup=warmup, groups=groups, prefix_len=prefix_len, masks=masks, init=init, seed=seed,
                             save_every=save_every)
    settings.check()
    if threads:
        torch.set_num_threads(threads)
    out = Path(out_dir)
    model_name = "tiny-target" if tiny else model
    samples = _collect(model_name, out, data_path, start, n_prompts, max_new_tokens, collect_batch, collect_dtype)
    gc.collect()
    _train(model_name, out, samples, settings, train_dtype)
    click.echo(f"wrote {out / PARAMS_FILE}: use it with --method bita --method-option checkpoint={out / PARAMS_FILE}")


def training_prompts(runner, data_path: str | None, start: int, count: int) -> list[tuple[str, list[int]]]:
    """(key, chain-of-thought prompt ids) of GSM8K questions start .. start+count-1."""
    from seed_tot.cli.fastcot import gsm8k_problems
    from seed_tot.fastcot_calibration import cot_prompt_ids

    _, problems = gsm8k_problems(data_path, start + count)
    chosen = problems[start : start + count]
    if not chosen:
        raise ConfigError(f"The data has no questions from index {start} on: lower --start or pass --data.")
    return [(f"gsm8k:{start + i}", cot_prompt_ids(runner, p.question)) for i, p in enumerate(chosen)]


def _collect(model_name, out: Path, data_path, start, n_prompts, max_new_tokens, batch, dtype):
    from seed_tot.models.loading import load_model
    from seed_tot.scheduling.factory import make_executor
    from seed_tot.training.bita.data import collect_samples, read_samples

    path = out / "samples.jsonl"
    have = len(read_samples(path))
    if have >= n_prompts:
        return read_samples(path)[:n_prompts]
    runner = load_model(model_name, dtype=dtype)
    prompts = training_prompts(runner, data_path, start, n_prompts)
    with tqdm(total=len(prompts), initial=have, desc="collect (greedy outputs)", unit="prompt", file=sys.stderr) as bar:
        samples = collect_samples(make_executor("batched", runner), prompts, path, max_new_tokens, batch, bar.update)
    return samples[:n_prompts]


def _train(model_name, out: Path, samples, settings, dtype):
    from seed_tot.models.loading import load_model
    from seed_tot.training.bita.trainer import train_bita

    runner = load_model(model_name, dtype=dtype)
    with tqdm(total=settings.steps, desc="train bita", unit="step", file=sys.stderr) as bar:
        def on_step(step, record):
            bar.n = step
            if "loss" in record:
                bar.set_postfix(loss=record["loss"], lr=f"{record['lr']:.1e}")
            bar.refresh()

        train_bita(runner, samples, out, settings, on_step)
