"""What turning a batch's logits into tokens costs: the top-p filter and `sample`, against the
full-sort filter and torch.multinomial they replaced, on the real target's logits.

    python scripts/bench_sampling.py --rows 39 --out results/bench_sampling.json

The target decodes --rows greedy continuations of GSM8K questions (prefilled one by one), and the
logits of every decode position are kept; then each way of sampling runs over the same logits
at the thought settings (temperature 0.7, top_p 0.95), in alternation, --repeats times. Reports
milliseconds per batch of --rows rows, the nucleus sizes, and the rows whose filtered
distributions differ (the new filter keeps every token tied at the cut, the old one kept
whichever of them its sort put first).
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

import click
import torch


from seed_tot.records import write_text_atomically
from seed_tot.machine_facts import machine_facts
from seed_tot.decoding.sampling import sample, top_p_filter
from seed_tot.models.loading import load_model


def full_sort_filter(probs: torch.Tensor, top_p: float) -> torch.Tensor:
    """The filter before: every row sorted in full."""
    top, order = probs.sort(dim=-1, descending=True)
    kept = torch.zeros_like(probs).scatter(-1, order, top.masked_fill(top.cumsum(-1) - top >= top_p, 0.0))
    return kept / kept.sum(-1, keepdim=True)


def multinomial_sample(probs: torch.Tensor, generator: torch.Generator) -> int:
    """The sampler before: torch.multinomial (one exponential per vocabulary entry)."""
    return int(torch.multinomial(probs, 1, generator=generator).item())


def real_logits(model: str, rows: int, steps: int) -> torch.Tensor:
    """(rows * steps, V) logits of greedy continuations of GSM8K questions."""
    from seed_tot_tasks import get_task

    runner = load_model(model, dtype="bfloat16")
    questions = [p.question for p in get_task("gsm8k").load(None)][:rows]
    out = []
    for question in questions:
        logits, cache = runner.prefill(runner.encode(f"Question: {question}\nAnswer step by step.\n"))
        for _ in range(steps):
            out.append(logits.float())
            token = int(logits.argmax())
            logits = runner.forward(torch.tensor([[token]]), cache)[0, -1]
    return torch.stack(out)


@click.command()
@click.option("--model", default="default-target")
@click.option("--rows", default=39, help="rows per batch (39: the median batch of a C=8 GSM8K run)")
@click.option("--steps", default=8, help="decode positions per question")
@click.option("--repeats", default=5)
@click.option("--threads", default=2)
@click.option("--out", type=click.Path(path_type=Path), default=None)
def main(model: str, rows: int, steps: int, repeats: int, threads: int, out: Path | None) -> None:
    torch.set_num_threads(threads)
    logits = real_logits(model, rows, steps)
    probs = torch.softmax(logits / 0.7, dim=-1)
    batches = [probs[i::steps] for i in range(steps)]  # each batch: one position of every row
    ways = {"full sort + multinomial": (full_sort_filter, multinomial_sample), "top-k first + inverse CDF": (top_p_filter, sample)}
    times = {name: [] for name in ways}
    for _ in range(repeats):
        for name, (filter_fn, sampler) in ways.items():
            generator = torch.Generator().manual_seed(0)
            started = time.perf_counter()
            for batch in batches:
                filtered = filter_fn(batch, 0.95)
                for row in filtered:
                    sampler(row, generator)
            times[name].append(1000 * (time.perf_counter() - started) / len(batches))
    nucleus = [int((top_p_filter(p, 0.95) > 0).sum()) for p in probs]
    differing = int((full_sort_filter(probs, 0.95) != top_p_filter(probs, 0.95)).any(-1).sum())
    result = {
        "command": " ".join(sys.argv), "machine": machine_facts(), "rows": rows, "positions": len(probs),
        "ms_per_batch_median": {name: round(statistics.median(t), 1) for name, t in times.items()},
        "nucleus_size": {"median": statistics.median(nucleus), "max": max(nucleus),
                         "rows_over_1024": sum(n > 1024 for n in nucleus)},
        "rows_differing": differing,
    }
    print(json.dumps(result, indent=1))
    if out:
        write_text_atomically(out, json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
