"""Decode-step time of a wide ragged batch with transformers' DynamicLayer (torch.cat of every
position on each forward) against seed-tot's SpareCapacityLayer (appends in place), side by side.

    python scripts/bench_kv_append.py --threads 2 --rows 8,32 --context 1000 --steps 8 \
        --out results/bench_kv_append.json

For each rows x context, a RaggedBatchCache holds random KV of `context` positions per row (the
cost of a forward does not depend on the values) and runs `--steps` one-token decode steps, once
with each layer kind, alternating kinds per repeat so load changes hit both alike. The logits of
both kinds are compared (they must be equal: the same values are attended to).
"""

from __future__ import annotations

import json
import statistics
import time

import click
import torch
from transformers.cache_utils import DynamicLayer

import seed_tot.runtime.cache as cache_module
from seed_tot.records import write_text_atomically
from seed_tot.machine_facts import machine_facts
from seed_tot.models.loading import load_model
from seed_tot.runtime.ragged import RaggedBatchCache


def random_rows(runner, rows: int, context: int, seed: int):
    config = runner.model.config
    heads = config.num_key_value_heads
    dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    generator = torch.Generator().manual_seed(seed)

    def tensor():
        return (torch.randn(1, heads, context, dim, generator=generator) * 0.1).to(runner.dtype)

    return [[(tensor(), tensor()) for _ in range(config.num_hidden_layers)] for _ in range(rows)]


def decode_steps(runner, kv_rows, steps: int, layer_class) -> tuple[list[float], torch.Tensor]:
    """Seconds of each decode step, and the last logits, with caches whose layers are `layer_class`."""
    original = cache_module.SpareCapacityLayer
    cache_module.SpareCapacityLayer = layer_class  # empty_cache() builds its layers from this name
    try:
        batch = RaggedBatchCache.from_rows(runner, kv_rows)
        seconds = []
        for step in range(steps):
            started = time.perf_counter()
            logits = batch.forward([[100 + step]] * batch.batch_size, [[-1]] * batch.batch_size)
            batch.commit([[0]] * batch.batch_size)
            seconds.append(time.perf_counter() - started)
        return seconds, logits
    finally:
        cache_module.SpareCapacityLayer = original


@click.command()
@click.option("--model", default="default-target", show_default=True)
@click.option("--dtype", default="bfloat16", show_default=True)
@click.option("--threads", type=int, default=None)
@click.option("--rows", default="8,32", show_default=True)
@click.option("--context", type=int, default=1000, show_default=True)
@click.option("--steps", type=int, default=8, show_default=True)
@click.option("--repeats", type=int, default=2, show_default=True)
@click.option("--out", type=click.Path(dir_okay=False), default=None)
def main(model, dtype, threads, rows, context, steps, repeats, out) -> None:
    if threads:
        torch.set_num_threads(threads)
    runner = load_model(model, dtype=dtype, device="cpu")
    kinds = {"DynamicLayer (torch.cat)": DynamicLayer, "SpareCapacityLayer": cache_module.SpareCapacityLayer}
    results = []
    for width in [int(r) for r in rows.split(",")]:
        kv_rows = random_rows(runner, width, context, seed=width)
        timings = {name: [] for name in kinds}
        logits = {}
        for repeat in range(repeats):
            order = list(kinds.items()) if repeat % 2 == 0 else list(kinds.items())[::-1]
            for name, layer_class in order:
                seconds, logits[name] = decode_steps(runner, kv_rows, steps, layer_class)
                timings[name].extend(seconds[1:])  # the first step adopts the stacked rows
        same = torch.equal(*logits.values())
        medians = {name: statistics.median(t) for name, t in timings.items()}
        base = medians["DynamicLayer (torch.cat)"]
        for name, median in medians.items():
            results.append({"rows": width, "context": context, "layer": name, "median_step_ms": round(median * 1000, 1),
                            "speedup": round(base / median, 2), "same_logits": same, "step_seconds": timings[name]})
            click.echo(f"| {width} | {context} | {name} | {median * 1000:.0f} | {base / median:.2f}x | {same} |")
    if out:
        write_text_atomically(out, json.dumps({"model": model, "dtype": dtype, "threads": torch.get_num_threads(),
                                         "steps": steps, "repeats": repeats, "machine": machine_facts(),
                                         "results": results}, indent=1))


if __name__ == "__main__":
    main()
