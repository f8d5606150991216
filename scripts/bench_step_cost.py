"""Cost of one ragged decode step and of a prefill on the real target, by dtype.

    python scripts/bench_step_cost.py bfloat16
    python scripts/bench_step_cost.py float32
    python scripts/bench_step_cost.py float16
    python scripts/bench_step_cost.py float16 --compare-packing


B rows of random KV (contexts of 300-1,400 tokens; a forward's cost does not depend on the
values) decode one token each, for B = 1 ... 64; then 64 and 256 prompt tokens are appended
after a 500-token context. Each figure is the best of 2 after a warm-up, on 2 threads.
--compare-packing loads the model twice, with plain and with packed linear layers
(seed_tot/runtime/packed_linear.py), and times the two alternately at each width.
"""

from __future__ import annotations

import os
import random
import time

import click
import torch

from seed_tot.models.loading import load_model
from seed_tot.runtime.ragged import RaggedBatchCache


def batch_of(runner, lengths: list[int]) -> RaggedBatchCache:
    """A ragged batch whose rows hold random KV of the given lengths."""
    config = runner.model.config
    layers, heads = config.num_hidden_layers, config.num_key_value_heads
    dim = config.hidden_size // config.num_attention_heads

    def random_kv(n):
        return torch.randn(1, heads, n, dim, dtype=runner.dtype)

    return RaggedBatchCache.from_rows(runner, [[(random_kv(n), random_kv(n)) for _ in range(layers)] for n in lengths])


def step_seconds(batch: RaggedBatchCache, width: int = 1) -> float:
    """One forward of `width` chained tokens per row, committed."""
    rows = batch.batch_size
    started = time.perf_counter()
    batch.forward([[5] * width] * rows, [[-1] + list(range(width - 1))] * rows,
                  logits_at=[width - 1] * rows if width > 1 else None)
    seconds = time.perf_counter() - started
    batch.commit([list(range(width))] * rows)
    return seconds


def best_of(runner, lengths: list[int], width: int = 1, repeats: int = 2) -> float:
    batch = batch_of(runner, lengths)
    step_seconds(batch, width)
    return min(step_seconds(batch, width) for _ in range(repeats))


def time_packing(dtype: str) -> None:
    os.environ["SEED_TOT_PACK_WEIGHTS"] = "0"
    plain = load_model("qwen2.5-coder-1.5b-instruct", dtype=dtype)
    os.environ["SEED_TOT_PACK_WEIGHTS"] = "1"
    packed = load_model("qwen2.5-coder-1.5b-instruct", dtype=dtype)
    print(f"{dtype}: {packed.packed_layers} linear layers packed", flush=True)
    random.seed(0)
    cases = [(f"decode B={rows:2d} ctx300-1400", [random.randint(300, 1400) for _ in range(rows)], 1)
             for rows in [1, 4, 8, 16, 34, 64]]
    cases += [(f"prefill {tokens} tokens after 500", [500], tokens) for tokens in [64, 256]]
    for label, lengths, width in cases:
        plain_s, packed_s = best_of(plain, lengths, width), best_of(packed, lengths, width)
        print(f"{dtype} {label}: plain {plain_s * 1e3:7.1f} ms, packed {packed_s * 1e3:7.1f} ms, "
              f"plain/packed {plain_s / packed_s:.2f}", flush=True)


@click.command(help=__doc__)
@click.argument("dtype", default="bfloat16")
@click.option("--compare-packing", is_flag=True, help="time plain and packed linear layers alternately")
def main(dtype: str, compare_packing: bool) -> None:
    torch.set_num_threads(2)
    if compare_packing:
        time_packing(dtype)
        return
    runner = load_model("qwen2.5-coder-1.5b-instruct", dtype=dtype)
    random.seed(0)
    for rows in [1, 4, 8, 16, 34, 64]:
        seconds = best_of(runner, [random.randint(300, 1400) for _ in range(rows)])
        print(f"{dtype} decode B={rows:2d} ctx300-1400 {seconds * 1e3:7.1f} ms ({seconds / rows * 1e3:5.1f}/row)", flush=True)
    for tokens in [64, 256]:
        seconds = best_of(runner, [500], width=tokens)
        print(f"{dtype} prefill {tokens} tokens after 500: {seconds * 1e3:.0f} ms ({seconds / tokens * 1e3:.1f} ms/token)",
              flush=True)


if __name__ == "__main__":
    main()
