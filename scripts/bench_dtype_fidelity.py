"""How closely a float16 or bfloat16 target follows the same model in float32, and whether
float16's range holds its activations.

    python scripts/bench_dtype_fidelity.py --start 100 --problems 8 --tokens 96 --out results/dtype_fidelity.json

The float32 target decodes each GSM8K problem's chain-of-thought prompt greedily; then each
lower-precision target reads the same prompt + tokens in one forward (teacher forcing) and we
count the positions where its argmax differs from float32's token, and where its greedy decoding
would first leave float32's text. Forward hooks on every linear layer record the largest
|value| entering or leaving it in float32: float16 overflows above 65,504.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import click
import torch

from seed_tot.models.loading import load_model
from seed_tot.reasoning.prompting import PromptFormatter
from seed_tot.records import write_text_atomically
from seed_tot.runtime.cache import empty_cache
from seed_tot_tasks.gsm8k import Gsm8kTask

FLOAT16_MAX = 65504.0


def greedy(runner, prompt: list[int], tokens: int) -> list[int]:
    cache = empty_cache()
    logits, cache = runner.prefill(prompt, cache)
    out = []
    for _ in range(tokens):
        token = int(logits.argmax())
        out.append(token)
        if token in runner.eos_token_ids:
            break
        logits = runner.forward(torch.tensor([[token]]), cache)[0, -1]
    return out


def continuation_logits(runner, prompt: list[int], continuation: list[int]) -> torch.Tensor:
    """Logits (n, V) predicting each continuation token, in one forward."""
    ids = torch.tensor([prompt + continuation])
    return runner.forward(ids, empty_cache(), logits_to_keep=len(continuation) + 1)[0, :-1]


class LinearExtremes:
    """Largest |input| and |output| over every nn.Linear while installed."""

    def __init__(self, model: torch.nn.Module) -> None:
        self.largest = 0.0
        self.handles = [m.register_forward_hook(self._hook) for m in model.modules() if isinstance(m, torch.nn.Linear)]

    def _hook(self, module, inputs, output) -> None:
        self.largest = max(self.largest, float(inputs[0].abs().max()), float(output.abs().max()))

    def remove(self) -> None:
        for handle in self.handles:
            handle.remove()


def compare(reference: list[torch.Tensor], candidate: list[torch.Tensor], tokens: list[list[int]]) -> dict:
    positions = flips = 0
    first_divergence = []
    worst_logit_error = 0.0
    for ref, cand, toks in zip(reference, candidate, tokens):
        argmax = cand.argmax(-1)
        differs = (argmax != torch.tensor(toks)).nonzero()
        positions += len(toks)
        flips += len(differs)
        first_divergence.append(int(differs[0]) if len(differs) else len(toks))
        worst_logit_error = max(worst_logit_error, float((cand - ref).abs().max()))
        if not torch.isfinite(cand).all():
            worst_logit_error = float("inf")
    return {
        "top1_disagreements": flips,
        "positions": positions,
        "first_divergence_per_problem": first_divergence,
        "problems_identical": sum(d == len(t) for d, t in zip(first_divergence, tokens)),
        "max_abs_logit_error": worst_logit_error,
    }


@click.command(help=__doc__)
@click.option("--model", default="default-target", show_default=True)
@click.option("--start", default=100, show_default=True)
@click.option("--problems", default=8, show_default=True)
@click.option("--tokens", default=96, show_default=True)
@click.option("--dtypes", default="bfloat16,float16", show_default=True)
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=None)
def main(model: str, start: int, problems: int, tokens: int, dtypes: str, out: Path | None) -> None:
    torch.set_num_threads(2)

    task = Gsm8kTask()
    chosen = task.load()[start : start + problems]
    reference_runner = load_model(model, dtype="float32")
    formatter = PromptFormatter(reference_runner.tokenizer)
    prompts = [formatter.encode(task.cot_prompt(p)) for p in chosen]

    started = time.perf_counter()
    continuations = [greedy(reference_runner, p, tokens) for p in prompts]
    extremes = LinearExtremes(reference_runner.model)
    reference = [continuation_logits(reference_runner, p, t) for p, t in zip(prompts, continuations)]
    extremes.remove()
    del reference_runner
    report = {
        "command": " ".join(sys.argv),
        "model": model,
        "problems": [p.id for p in chosen],
        "float32_largest_linear_abs": extremes.largest,
        "float16_max": FLOAT16_MAX,
        "dtypes": {},
    }
    for name in dtypes.split(","):
        runner = load_model(model, dtype=name)
        candidate = [continuation_logits(runner, p, t) for p, t in zip(prompts, continuations)]
        report["dtypes"][name] = compare(reference, candidate, continuations)
        del runner
    report["seconds"] = round(time.perf_counter() - started, 1)
    text = json.dumps(report, indent=2)
    print(text)
    if out:
        write_text_atomically(out, text + "\n")


if __name__ == "__main__":
    main()
