"""Forward-pass timing of the default models: q_len x batch after a prompt in the KV cache.

    python scripts/bench_forward.py --threads 2 --out results/bench_forward.json

For each model, a ~200-token prompt is prefilled once and copied to every batch size; each
timed forward appends q_len tokens to that cache and is rolled back afterwards, so every
repeat sees the same context length. Settings are timed round-robin (one forward of each per
round), so a load change on a shared machine hits them all alike. Prints a markdown table
(median and min wall time over --repeats, median process CPU time, ratio to the first
setting) and writes JSON. The load average before and after is recorded next to the numbers;
with --threads 1, CPU ms is close to what the forward costs on an idle core.
"""

from __future__ import annotations

import json
import statistics
import time

import click
import torch

from seed_tot.records import write_text_atomically
from seed_tot.machine_facts import load_average, machine_facts
from seed_tot.models.loading import load_model
from seed_tot.runtime import ModelRunner, cache_length, rollback
from seed_tot.runtime.cache import repeat_rows


def prompt_ids(vocab_size: int, length: int, seed: int) -> torch.Tensor:
    """Random token ids (the cost of a forward does not depend on which tokens they are)."""
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(0, min(vocab_size, 100_000), (1, length), generator=generator)


def timed_forward(runner: ModelRunner, cache, new_tokens: torch.Tensor) -> tuple[float, float]:
    """(wall ms, process CPU ms) of one forward; the cache is rolled back afterwards."""
    context = cache_length(cache)
    wall, cpu = time.perf_counter(), time.process_time()
    runner.forward(new_tokens, cache)
    wall, cpu = (time.perf_counter() - wall) * 1000, (time.process_time() - cpu) * 1000
    rollback(cache, context)
    return wall, cpu


def bench_model(name: str, dtype: str, q_lens: list[int], batches: list[int], prompt_len: int,
                repeats: int, warmup: int, seed: int) -> tuple[list[dict], float]:
    """Time every (batch, q_len) round-robin, so load changes on a shared machine hit all alike."""
    started = time.perf_counter()
    runner = load_model(name, dtype=dtype, device="cpu")
    load_s = time.perf_counter() - started
    prompt = prompt_ids(runner.vocab_size, prompt_len, seed)
    prefix = runner.new_cache()
    runner.forward(prompt, prefix)
    caches = {batch: repeat_rows(prefix, batch) for batch in batches}
    settings = [(batch, q_len) for batch in batches for q_len in q_lens]
    walls = {setting: [] for setting in settings}
    cpus = {setting: [] for setting in settings}
    generator = torch.Generator().manual_seed(seed)
    for round_index in range(warmup + repeats):
        for batch, q_len in settings:
            new_tokens = torch.randint(0, min(runner.vocab_size, 1000), (batch, q_len), generator=generator)
            wall, cpu = timed_forward(runner, caches[batch], new_tokens)
            if round_index >= warmup:
                walls[(batch, q_len)].append(wall)
                cpus[(batch, q_len)].append(cpu)
    base = statistics.median(walls[settings[0]])
    rows = []
    for batch, q_len in settings:
        timings = walls[(batch, q_len)]
        rows.append({
            "model": name, "dtype": str(runner.dtype).removeprefix("torch."), "batch": batch,
            "q_len": q_len, "context": prompt_len, "median_ms": statistics.median(timings),
            "min_ms": min(timings), "median_cpu_ms": statistics.median(cpus[(batch, q_len)]),
            "vs_first": statistics.median(timings) / base, "timings_ms": timings,
        })
        click.echo(f"  {name} batch={batch} q_len={q_len}: median {rows[-1]['median_ms']:.1f} ms", err=True)
    return rows, load_s


def markdown_table(rows: list[dict]) -> str:
    lines = ["| model | dtype | batch | q_len | median ms | min ms | median CPU ms | vs batch 1, q_len 1 |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['model']} | {r['dtype']} | {r['batch']} | {r['q_len']} | "
                     f"{r['median_ms']:.1f} | {r['min_ms']:.1f} | {r['median_cpu_ms']:.1f} | {r['vs_first']:.2f}x |")
    return "\n".join(lines)


@click.command()
@click.option("--models", "model_names", default="default-draft,default-target", show_default=True,
              help="Comma-separated model names (aliases, directories, .gguf files).")
@click.option("--dtype", default="bfloat16", show_default=True)
@click.option("--threads", type=int, default=None, help="torch threads (default: torch's own choice).")
@click.option("--q-lens", default="1,4,8", show_default=True)
@click.option("--batches", default="1,3", show_default=True)
@click.option("--prompt-len", type=int, default=200, show_default=True)
@click.option("--repeats", type=int, default=7, show_default=True)
@click.option("--warmup", type=int, default=2, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--out", type=click.Path(dir_okay=False), default=None, help="Write the results as JSON here.")
def main(model_names, dtype, threads, q_lens, batches, prompt_len, repeats, warmup, seed, out) -> None:
    if threads:
        torch.set_num_threads(threads)
    q_list = [int(x) for x in q_lens.split(",")]
    batch_list = [int(x) for x in batches.split(",")]
    load_before = load_average()
    rows, load_seconds = [], {}
    for name in [n.strip() for n in model_names.split(",") if n.strip()]:
        model_rows, load_seconds[name] = bench_model(name, dtype, q_list, batch_list, prompt_len, repeats, warmup, seed)
        rows.extend(model_rows)
    load_after = load_average()
    table = markdown_table(rows)
    click.echo(table)
    click.echo(f"\ntorch threads {torch.get_num_threads()}, context {prompt_len} tokens, median of {repeats} "
               f"(after {warmup} warm-up); load average before {load_before}, after {load_after}; "
               f"model load s: " + ", ".join(f"{k} {v:.1f}" for k, v in load_seconds.items()))
    if out:
        result = {
            "rows": rows, "load_seconds": load_seconds, "threads": torch.get_num_threads(),
            "load_average_before": load_before, "machine_after": machine_facts(),
            "repeats": repeats, "warmup": warmup,
        }
        write_text_atomically(out, json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
