"""Weight-only 4-bit matmul against the 16-bit linear layers, at the default target's shapes.

    python scripts/bench_int4_matmul.py --threads 2 --out results/bench_int4_matmul.json

The default models are published as Q4_K_M GGUF files. Their Q4_K tensors are affine 4-bit
weights in groups of 32 (w = scale * q - min per group), which is the layout of torch's CPU
weight-only int4 kernel (`_weight_int4pack_mm_for_cpu`, group size 32, bfloat16 scales and zero
points). So the 4-bit weights could be run as they are instead of dequantized 16-bit copies. This
times that kernel against float16 and bfloat16 `nn.Linear` (the in-process target's dtypes) for
the seven linear layers of one decoder layer of Qwen2.5-1.5B (q, k, v, o, gate, up, down), at
M = tokens per forward (rows x tokens per row: a batched-lookup forward verifies several drafted
tokens per row). Settings are timed round-robin; the load average before and after is recorded.
The weights are random: a matmul's cost does not depend on the values.
"""

from __future__ import annotations

import json
import statistics
import time

import click
import torch

from seed_tot.records import write_text_atomically
from seed_tot.machine_facts import load_average, machine_facts

GROUP = 32
# (in_features, out_features) of one Qwen2.5-1.5B decoder layer: q, k, v, o, gate, up, down.
LAYER_SHAPES = [(1536, 1536), (1536, 256), (1536, 256), (1536, 1536), (1536, 8960), (1536, 8960), (8960, 1536)]


def int4_layer(in_features: int, out_features: int, generator: torch.Generator):
    codes = torch.randint(0, 16, (out_features, in_features), dtype=torch.int32, generator=generator)
    packed = torch.ops.aten._convert_weight_to_int4pack_for_cpu(codes, 2)
    scales_and_zeros = torch.rand(in_features // GROUP, out_features, 2, generator=generator).to(torch.bfloat16)
    return lambda x: torch.ops.aten._weight_int4pack_mm_for_cpu(x, packed, GROUP, scales_and_zeros)


def dense_layer(in_features: int, out_features: int, dtype: torch.dtype):
    layer = torch.nn.Linear(in_features, out_features, bias=False).to(dtype)
    return lambda x: layer(x)


def layer_functions(generator: torch.Generator) -> dict[str, tuple[torch.dtype, list]]:
    return {
        "int4 (bfloat16 activations)": (torch.bfloat16, [int4_layer(i, o, generator) for i, o in LAYER_SHAPES]),
        "float16 linear": (torch.float16, [dense_layer(i, o, torch.float16) for i, o in LAYER_SHAPES]),
        "bfloat16 linear": (torch.bfloat16, [dense_layer(i, o, torch.bfloat16) for i, o in LAYER_SHAPES]),
    }


def time_layer(functions: list, inputs: list[torch.Tensor]) -> float:
    start = time.perf_counter()
    with torch.inference_mode():
        for function, x in zip(functions, inputs):
            function(x)
    return time.perf_counter() - start


@click.command()
@click.option("--threads", type=int, default=2, show_default=True)
@click.option("--tokens", default="1,2,4,8,16,32", show_default=True, help="Tokens per forward (M), comma-separated.")
@click.option("--repeats", type=int, default=20, show_default=True)
@click.option("--out", type=click.Path(dir_okay=False), default=None, help="Write the results as JSON here.")
def main(threads: int, tokens: str, repeats: int, out: str | None) -> None:
    torch.set_num_threads(threads)
    generator = torch.Generator().manual_seed(0)
    settings = layer_functions(generator)
    widths = [int(t) for t in tokens.split(",")]
    load_before = load_average()
    rows = []
    for m in widths:
        inputs = {name: [torch.randn(m, i, generator=generator).to(dtype) for i, _ in LAYER_SHAPES]
                  for name, (dtype, _) in settings.items()}
        times: dict[str, list[float]] = {name: [] for name in settings}
        for round_ in range(repeats + 2):  # two warm-up rounds
            for name, (_, functions) in settings.items():
                elapsed = time_layer(functions, inputs[name])
                if round_ >= 2:
                    times[name].append(elapsed)
        medians = {name: statistics.median(values) * 1e3 for name, values in times.items()}
        rows.append({"tokens_per_forward": m, "median_ms_per_layer": medians})
    result = {
        "command": f"python scripts/bench_int4_matmul.py --threads {threads} --tokens {tokens} --repeats {repeats}",
        "torch": torch.__version__,
        "group_size": GROUP,
        "layer_shapes": LAYER_SHAPES,
        "load_average_before": load_before,
        "load_average_after": load_average(),
        "machine": machine_facts(),
        "rows": rows,
    }
    names = list(settings)
    print("| tokens per forward | " + " | ".join(f"{n}, ms per layer" for n in names) + " | int4 / float16 |")
    print("|---|" + "---|" * (len(names) + 1))
    for row in rows:
        ms = row["median_ms_per_layer"]
        speed = ms["float16 linear"] / ms["int4 (bfloat16 activations)"]
        print(f"| {row['tokens_per_forward']} | " + " | ".join(f"{ms[n]:.2f}" for n in names) + f" | {speed:.2f}x |")
    print(f"load average before {load_before}, after {result['load_average_after']}")
    if out:
        write_text_atomically(out, json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
