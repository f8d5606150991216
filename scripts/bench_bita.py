"""BiTA against AR and lookahead on held-out GSM8K chain-of-thought prompts, greedy, side by side.

Every method decodes the same prompts in one process, one after another per prompt (the order
rotated per prompt so a drift of the shared machine's load hits every method alike). Reports
tokens per target forward (load-independent), wall-clock tokens/s and the ratio to AR, drafted
tokens accepted / verified, and whether each output is token-identical to AR's.

    python scripts/bench_bita.py --checkpoint runs/bita/bita.safetensors --prompts 8 --max-new-tokens 96 \
        --output results/bita_gsm8k/bench.json

BiTA "untrained" uses the parameters training starts from (init_prompt, same prefix/masks as the
checkpoint); "trained" loads the checkpoint. Prompts are GSM8K test rows start+1 .. start+prompts
(never rows 301 onward, which training uses).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import click
import torch

from seed_tot.bench import machine_facts
from seed_tot.fastcot_calibration import cot_prompt_ids
from seed_tot.config import DecodeConfig
from seed_tot.decoding.autoregressive import autoregressive_decode
from seed_tot.decoding.bita import BitaDecoder
from seed_tot.decoding.bita_params import init_prompt, load_prompt
from seed_tot.decoding.lookahead import lookahead_decode
from seed_tot.models import load_model
from seed_tot_tasks.gsm8k import Gsm8kTask




def methods(target, args) -> list[tuple[str, object]]:
    window, ngram, guesses = (int(x) for x in args.lookahead.split(","))
    rows = [("AR", lambda p, c: autoregressive_decode(target, p, c)),
            (f"lookahead W={window} N={ngram} G={guesses}",
             lambda p, c: lookahead_decode(target, p, c, window=window, ngram=ngram, candidates=guesses))]
    trained = load_prompt(args.checkpoint) if args.checkpoint else None
    prefix = trained.prefix_len if trained else 16
    masks = trained.masks if trained else 3
    untrained = init_prompt(target, prefix, masks)
    for k in (int(x) for x in args.candidates.split(",")):
        rows.append((f"BiTA untrained k={k}", BitaDecoder(target, untrained, candidates=k).decode))
        if trained is not None:
            rows.append((f"BiTA trained k={k}", BitaDecoder(target, trained, candidates=k).decode))
    return rows


def run_prompt(index: int, prompt: list[int], rows, config: DecodeConfig) -> list[dict]:
    order = rows[index % len(rows):] + rows[: index % len(rows)]
    outputs = {}
    for name, decode in order:
        outputs[name] = decode(prompt, config)
    reference = outputs["AR"].token_ids
    records = []
    for name, _ in rows:
        out = outputs[name]
        records.append({"prompt": index, "method": name, **out.stats.as_dict(), "identical_to_ar": out.token_ids == reference})
        print(f"prompt {index} {name}: {out.stats.new_tokens} tokens, {out.stats.target_forwards} forwards, "
              f"{out.stats.wall_seconds:.1f} s, identical={out.token_ids == reference}", file=sys.stderr, flush=True)
    return records


def summarise(records: list[dict], names: list[str]) -> str:
    ar_rate = _rate([r for r in records if r["method"] == "AR"])
    lines = ["| method | tokens | target forwards | tokens / forward | drafted accepted / verified | wall s | tokens/s "
             "| speed vs AR | identical to AR |", "|---|---|---|---|---|---|---|---|---|"]
    for name in names:
        mine = [r for r in records if r["method"] == name]
        tokens, forwards = sum(r["new_tokens"] for r in mine), sum(r["target_forwards"] for r in mine)
        seconds = sum(r["wall_seconds"] for r in mine)
        proposed, accepted = sum(r["draft_tokens_proposed"] for r in mine), sum(r["draft_tokens_accepted"] for r in mine)
        drafted = f"{accepted} / {proposed}" if proposed else "-"
        lines.append(f"| {name} | {tokens} | {forwards} | {tokens / forwards:.3f} | {drafted} | {seconds:.1f} | "
                     f"{tokens / seconds:.2f} | {_rate(mine) / ar_rate:.2f}x | {sum(r['identical_to_ar'] for r in mine)}/{len(mine)} |")
    return "\n".join(lines)


def _rate(rows: list[dict]) -> float:
    return sum(r["new_tokens"] for r in rows) / sum(r["wall_seconds"] for r in rows)


@click.command(help=__doc__)
@click.option("--model", default="default-draft", show_default=True, help="the frozen model (the checkpoint's)")
@click.option("--tiny", is_flag=True, help="tiny random model (smoke test)")
@click.option("--checkpoint", default=None, help="trained BiTA parameters (bita.safetensors)")
@click.option("--dtype", default="auto", show_default=True)
@click.option("--threads", type=int, default=None)
@click.option("--start", type=int, default=0, show_default=True, help="first GSM8K test row index (0 = row 1)")
@click.option("--prompts", type=int, default=8, show_default=True)
@click.option("--max-new-tokens", type=int, default=96, show_default=True)
@click.option("--lookahead", default="4,3,4", show_default=True, help="W,N,G of the lookahead row")
@click.option("--candidates", default="5,3", show_default=True, help="BiTA top-k at the first level, one row each")
@click.option("--output", default="bench_bita.json", show_default=True)
def main(**options) -> None:
    # in declaration order (click passes the options given on the command line first): the settings record keeps it
    args = SimpleNamespace(**{p.name: options[p.name] for p in click.get_current_context().command.params})
    if args.threads:
        torch.set_num_threads(args.threads)
    target = load_model("tiny-target" if args.tiny else args.model, dtype=args.dtype)
    problems = Gsm8kTask().load()[: args.start + args.prompts]  # the bundled test split
    if args.start + args.prompts > 300:
        raise SystemExit("Evaluation prompts must come from GSM8K rows 1-300 (training uses rows 301 on).")
    rows = methods(target, args)
    config = DecodeConfig(max_new_tokens=args.max_new_tokens)
    for _, decode in rows:  # warm-up: the first call of a process pays one-time costs (allocations, kernels)
        decode(cot_prompt_ids(target, problems[args.start].question), DecodeConfig(max_new_tokens=4))
    started, load_before = time.time(), os.getloadavg()
    records = []
    for i, problem in enumerate(problems[args.start :]):
        records.extend(run_prompt(i, cot_prompt_ids(target, problem.question), rows, config))
    table = summarise(records, [name for name, _ in rows])
    print(table)
    settings = {k: v for k, v in vars(args).items()} | {"rows": f"GSM8K test rows {args.start + 1}-{args.start + args.prompts}",
                                                         "dtype_resolved": str(target.dtype), "load_before": load_before,
                                                         "minutes": round((time.time() - started) / 60, 1),
                                                         "load_after": os.getloadavg(), "warm_up": "every method once, 4 tokens",
                                                         "command": " ".join(["python", *sys.argv])}
    out = Path(args.output)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"settings": settings, "machine": machine_facts(), "table": table, "records": records}, indent=1))
    out.with_suffix(".md").write_text(f"# BiTA vs AR vs lookahead\n\nsettings: `{json.dumps(settings)}`\n\n"
                                      f"machine: `{json.dumps(machine_facts())}`\n\n{table}\n")


if __name__ == "__main__":
    main()
