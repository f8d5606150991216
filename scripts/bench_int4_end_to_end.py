"""Would 4-bit weights speed up the in-process target? One request, and one whole GSM8K tree.

    python scripts/bench_int4_end_to_end.py ar                   # one request, 64 tokens, AR: both arms
    python scripts/bench_int4_end_to_end.py gsm8k --max-tokens 16 -- --limit 1 --out /tmp/int4
    python scripts/bench_int4_end_to_end.py gsm8k --max-tokens 0 -- --limit 1 --out /tmp/dense

torch's CPU weight-only int4 matmul is faster than the 16-bit product for narrow forwards and
slower for wide ones (scripts/bench_int4_matmul.py). Here every decoder-layer linear of the
loaded target also gets a 4-bit copy, used for forwards of at most --max-tokens tokens (0 = off).
The copy is round-to-nearest from the 16-bit weights (groups of 32): close to, but not, the GGUF
file's own 4-bit weights, so this measures speed, never quality (the 4-bit arm's trees differ).
Nothing here is part of the package: the script wraps the layers after seed-tot loads them.
"""

from __future__ import annotations

import sys
import time

import click
import torch

GROUP = 32


def quantize_groups(weight: torch.Tensor, group: int = GROUP) -> tuple[torch.Tensor, torch.Tensor]:
    """Round-to-nearest asymmetric 4-bit codes (out x in, int32) and [scale, zero] per group in the
    kernel's layout (in / group, out, 2), for w ~ (code - 8) * scale + zero."""
    out_features, in_features = weight.shape
    grouped = weight.float().reshape(out_features, in_features // group, group)
    low, high = grouped.amin(dim=-1), grouped.amax(dim=-1)
    scale = ((high - low) / 15).clamp(min=1e-8)
    codes = torch.round((grouped - low.unsqueeze(-1)) / scale.unsqueeze(-1)).clamp(0, 15)
    scales_and_zeros = torch.stack([scale, low + 8 * scale], dim=-1).transpose(0, 1).contiguous()
    return codes.reshape(out_features, in_features).to(torch.int32), scales_and_zeros.to(torch.bfloat16)


class Int4Linear(torch.nn.Module):
    """A linear layer that runs forwards of at most `max_tokens` tokens on a 4-bit copy."""

    def __init__(self, linear: torch.nn.Linear, max_tokens: int):
        super().__init__()
        self.dense, self.max_tokens = linear, max_tokens
        self.in_features, self.out_features = linear.in_features, linear.out_features
        codes, self.scales_and_zeros = quantize_groups(linear.weight.detach())
        self.packed = torch.ops.aten._convert_weight_to_int4pack_for_cpu(codes, 2)
        self.bias = None if linear.bias is None else linear.bias.detach()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        tokens = x.numel() // self.in_features
        if tokens > self.max_tokens:
            return self.dense(x)
        flat = x.reshape(tokens, self.in_features).to(torch.bfloat16).contiguous()
        out = torch.ops.aten._weight_int4pack_mm_for_cpu(flat, self.packed, GROUP, self.scales_and_zeros).to(x.dtype)
        if self.bias is not None:
            out = out + self.bias
        return out.reshape(*x.shape[:-1], self.out_features)


def add_int4_copies(model: torch.nn.Module, max_tokens: int) -> int:
    """Wrap the decoder layers' nn.Linear modules (not the LM head); return how many."""
    wrapped = 0
    for parent_name, parent in list(model.named_modules()):
        for name, child in list(parent.named_children()):
            if "layers" in parent_name and type(child) is torch.nn.Linear and child.in_features % GROUP == 0:
                setattr(parent, name, Int4Linear(child, max_tokens))
                wrapped += 1
    return wrapped


def install(max_tokens: int) -> None:
    """Make seed-tot's loader add the 4-bit copies right after it packs a model's layers."""
    import seed_tot.models.loading as loading

    pack = loading.pack_linear_layers

    def pack_then_wrap(model: torch.nn.Module) -> int:
        packed = pack(model)
        wrapped = add_int4_copies(model, max_tokens) if max_tokens > 0 else 0
        print(f"4-bit copies for forwards of <= {max_tokens} tokens: {wrapped} layers", file=sys.stderr)
        return packed

    loading.pack_linear_layers = pack_then_wrap


def one_request(max_tokens: int, new_tokens: int) -> float:
    from seed_tot.config import DecodeConfig
    from seed_tot.decoding.autoregressive import autoregressive_decode
    from seed_tot.models.loading import load_model

    install(max_tokens)
    target = load_model("default-target")
    ids = target.encode("Janet's ducks lay 16 eggs per day. She eats three for breakfast every morning and "
                        "bakes muffins for her friends every day with four. How much does she make?")
    autoregressive_decode(target, ids, DecodeConfig(max_new_tokens=4), 0)  # warm-up
    start = time.perf_counter()
    autoregressive_decode(target, ids, DecodeConfig(max_new_tokens=new_tokens, ignore_eos=True), 0)
    return new_tokens / (time.perf_counter() - start)


@click.group()
def main() -> None:
    """4-bit copies of the target's layers: one request or a whole task run."""


@main.command()
@click.option("--max-tokens", "max_tokens_list", default="0,16", show_default=True,
              help="Arms: 4-bit copies for forwards of at most this many tokens (0 = off).")
@click.option("--new-tokens", type=int, default=64, show_default=True)
@click.option("--threads", type=int, default=2, show_default=True)
def ar(max_tokens_list: str, new_tokens: int, threads: int) -> None:
    """One greedy AR request per arm, each arm in a fresh process."""
    import subprocess

    for arm in max_tokens_list.split(","):
        code = (f"import torch; torch.set_num_threads({threads}); import sys; sys.path.insert(0, 'scripts'); "
                f"from bench_int4_end_to_end import one_request; "
                f"print(f'max 4-bit tokens {arm}: {{one_request({arm}, {new_tokens}):.2f}} tokens/s')")
        subprocess.run([sys.executable, "-c", code], check=True)


@main.command(context_settings={"ignore_unknown_options": True})
@click.option("--max-tokens", type=int, default=16, show_default=True)
@click.argument("gsm8k_args", nargs=-1, type=click.UNPROCESSED)
def gsm8k(max_tokens: int, gsm8k_args: tuple[str, ...]) -> None:
    """`seed-tot gsm8k GSM8K_ARGS...` with the 4-bit copies installed."""
    from seed_tot.cli import main as cli

    install(max_tokens)
    cli.main(["gsm8k", *gsm8k_args], standalone_mode=True)


if __name__ == "__main__":
    main()
