"""How far `--int8` moves the target from its 16-bit self, read on chains it wrote.

For the greedy chain of each problem of a stored chain pool, one forward of the chain-of-thought
prompt and the chain through each model; at every position of the chain, whether a model's most
likely next token is the 16-bit target's. The same read for the float32 target gives the yardstick:
how much the 16-bit dtype alone moves those choices. Writes OUT/fidelity.json and OUT/fidelity.md.

    python scripts/int8_fidelity.py results/heldout-gsm8k-43-100/cot-pool --chains 20 --out results/engines/int8-fidelity
"""

from __future__ import annotations

import gc
import json
import sys
import time
from pathlib import Path

import click
import torch

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # `python scripts/int8_fidelity.py` from anywhere: the package and tasks/
    sys.path.insert(0, str(ROOT))


def chain_token_ids(runner, message: str, chain: str) -> tuple[torch.Tensor, int]:
    """(prompt + chain token ids, where the chain starts)."""
    from seed_tot.reasoning.prompting import PromptFormatter

    formatter = PromptFormatter(runner.tokenizer)
    prompt = formatter.encode(message)
    whole = formatter.encode_text(formatter.reply_context(message) + chain)
    return torch.tensor([whole]), len(prompt)


def next_token_choices(runner, readings: list[tuple[str, str]]) -> list[torch.Tensor]:
    """Per reading, the model's most likely next token at each chain position (the last prompt
    position through the second-to-last chain token)."""
    picks = []
    with torch.inference_mode():
        for message, chain in readings:
            ids, start = chain_token_ids(runner, message, chain)
            logits = runner.forward(ids)[0]
            picks.append(logits[start - 1:-1].float().argmax(-1))
    return picks


def agreement(picks: list[torch.Tensor], reference: list[torch.Tensor]) -> dict:
    same = sum(int((a == b).sum()) for a, b in zip(picks, reference, strict=True))
    total = sum(len(b) for b in reference)
    first_differences = [int((a != b).nonzero()[0]) if bool((a != b).any()) else None for a, b in zip(picks, reference)]
    return {"positions": total, "same_top1": same, "agreement": round(same / total, 4),
            "chains_without_a_difference": sum(d is None for d in first_differences),
            "median_first_difference": _median([d for d in first_differences if d is not None])}


def _median(values: list[int]) -> int | None:
    return sorted(values)[len(values) // 2] if values else None


def timed_choices(label: str, load, readings) -> tuple[list[torch.Tensor], dict]:
    started = time.perf_counter()
    runner = load()
    loaded = time.perf_counter()
    picks = next_token_choices(runner, readings)
    settings = {"model": label, "dtype": str(runner.dtype).removeprefix("torch."), "int8_layers": runner.int8_layers,
                "packed_layers": runner.packed_layers, "load_s": round(loaded - started, 1),
                "forward_s": round(time.perf_counter() - loaded, 1)}
    del runner
    gc.collect()
    return picks, settings


@click.command()
@click.argument("pool", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--target", default="default-target", show_default=True)
@click.option("--dtype", default="bfloat16", show_default=True, help="The 16-bit dtype both the reference and --int8 run in.")
@click.option("--chains", type=int, default=20, show_default=True, help="Greedy chains of the pool's first N problems.")
@click.option("--out", type=click.Path(path_type=Path), required=True)
def main(pool: Path, target: str, dtype: str, chains: int, out: Path) -> None:
    from seed_tot.models.loading import load_model
    from seed_tot.training.value.store import chains_of_pool
    from seed_tot_tasks import get_task

    items = chains_of_pool(pool, get_task, samples=0)[:chains]
    readings = [(item.message, item.chains[0].text) for item in items if item.chains]
    reference, ref_settings = timed_choices(f"{target} {dtype}", lambda: load_model(target, dtype=dtype), readings)
    rows = [ref_settings]
    report = {"pool": str(pool), "problems": [item.problem_id for item in items], "reference": ref_settings}
    for key, label, load in (
        ("int8", f"{target} {dtype} --int8", lambda: load_model(target, dtype=dtype, int8=True)),
        ("float32", f"{target} float32", lambda: load_model(target, dtype="float32")),
    ):
        picks, settings = timed_choices(label, load, readings)
        report[key] = {**settings, **agreement(picks, reference)}
        rows.append(report[key])
        click.echo(json.dumps(report[key]))
    out.mkdir(parents=True, exist_ok=True)
    (out / "fidelity.json").write_text(json.dumps(report, indent=1))
    lines = [f"# Next-token agreement with {target} in {dtype}, on {len(readings)} greedy chains of {pool}", "",
             f"Command: `python {' '.join(sys.argv)}`", "",
             "| model | positions | same top-1 | agreement | chains with no differing position | median first difference (token) | forward s |",
             "|---|---|---|---|---|---|---|"]
    for row in rows[1:]:
        lines.append(f"| {row['model']} | {row['positions']} | {row['same_top1']} | {row['agreement']:.2%} | "
                     f"{row['chains_without_a_difference']}/{len(readings)} | {row['median_first_difference']} | {row['forward_s']} |")
    (out / "fidelity.md").write_text("\n".join(lines) + "\n")
    click.echo(f"wrote {out / 'fidelity.md'}")


if __name__ == "__main__":
    main()
