"""The int8 product (`--int8`) against the packed bfloat16 one, on the default target's shapes.

For each decode width (rows) and each of the target's linear shapes (the MLP's up/gate and down
projections, the output layer): milliseconds per product of the packed bfloat16 layer, the int8
layer (seed_tot/runtime/int8_linear.py) and torch's weight-only int8 kernel (16-bit arithmetic),
on random weights. Writes OUT (JSON) and prints a table.

    python scripts/bench_int8_linear.py --threads 2 --out results/engines/bench_int8_linear.json
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import click
import torch

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

SHAPES = "1536x8960,8960x1536,1536x151936"  # in x out: the target's up/gate, down, output layer


def milliseconds(f, x: torch.Tensor, repeats: int) -> float:
    for _ in range(3):
        f(x)
    started = time.perf_counter()
    for _ in range(repeats):
        f(x)
    return (time.perf_counter() - started) / repeats * 1e3


def weight_only_int8(linear: torch.nn.Linear):
    weight = linear.weight.detach().float()
    scales = (weight.abs().amax(1) / 127).clamp_min(1e-12)
    codes = torch.round(weight / scales[:, None]).to(torch.int8)
    return lambda x: torch._weight_int8pack_mm(x, codes, scales.to(x.dtype))


@click.command()
@click.option("--threads", type=int, default=2, show_default=True)
@click.option("--rows", default="4,16,32,64", show_default=True)
@click.option("--repeats", type=int, default=30, show_default=True)
@click.option("--shapes", default=SHAPES, show_default=True, help="Comma-separated INxOUT.")
@click.option("--out", type=click.Path(path_type=Path), required=True)
def main(threads: int, rows: str, repeats: int, shapes: str, out: Path) -> None:
    from seed_tot.runtime.int8_linear import Int8Linear, int8_works
    from seed_tot.runtime.packed_linear import PackedLinear, packing_works

    if not (int8_works() and packing_works(torch.bfloat16)):
        raise click.ClickException("This CPU or torch build runs no packed bfloat16 or no fbgemm int8 product.")
    torch.set_num_threads(threads)
    results = []
    with torch.inference_mode():
        for width in (int(r) for r in rows.split(",")):
            for inputs, outputs in (map(int, shape.split("x")) for shape in shapes.split(",")):
                linear = torch.nn.Linear(inputs, outputs, bias=False)
                x = torch.randn(width, inputs).bfloat16()
                row = {"rows": width, "in": inputs, "out": outputs,
                       "bf16_packed_ms": milliseconds(PackedLinear(linear.bfloat16()), x, repeats),
                       "int8_ms": milliseconds(Int8Linear(linear), x, repeats),
                       "int8_weight_only_ms": milliseconds(weight_only_int8(linear), x, repeats)}
                row["int8_speedup"] = row["bf16_packed_ms"] / row["int8_ms"]
                row["weight_only_speedup"] = row["bf16_packed_ms"] / row["int8_weight_only_ms"]
                results.append({k: round(v, 3) if isinstance(v, float) else v for k, v in row.items()})
                click.echo(f"{width:3d} rows {inputs}x{outputs}: bf16 packed {row['bf16_packed_ms']:.2f} ms, "
                           f"int8 {row['int8_ms']:.2f} ms ({row['int8_speedup']:.2f}x), weight-only int8 "
                           f"{row['int8_weight_only_ms']:.2f} ms ({row['weight_only_speedup']:.2f}x)")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"command": f"python {' '.join(sys.argv)}", "threads": threads, "torch": torch.__version__,
                               "results": results}, indent=1) + "\n")


if __name__ == "__main__":
    main()
