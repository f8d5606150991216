"""Benchmark single-sequence decoders on GSM8K thought-generation prompts with the real default pair.

Methods, run side by side (for each prompt every method runs once, in turn, so machine noise
hits all of them alike): our AR, SD for each k of --sd-ks, MCSD --k-config, and the peers
transformers generate() and assisted generation (assistant_model=). Prints a table per
temperature and writes JSON (--out).

    python scripts/bench_decoding.py --prompts 6 --max-new-tokens 64 --out bench_decoding.json
"""

from __future__ import annotations

import json
from pathlib import Path

import click
import torch

from seed_tot.config import DecodeConfig, parse_k_config
from seed_tot.decoding.autoregressive import autoregressive_decode
from seed_tot.decoding.drafters import speculative_decode
from seed_tot.models import load_pair
from seed_tot.records import write_text_atomically
from seed_tot.runtime import ModelRunner
from seed_tot.scheduling.peers import hf_generate_decode

INSTRUCTION = (
    "Answer the question step by step. Write the next reasoning step only: one short sub-question "
    "and its answer."
)
VENDORED_DATA = Path(__file__).resolve().parent.parent / "tasks" / "data" / "gsm8k" / "test.jsonl"


def gsm8k_questions(path: Path | None, count: int) -> list[str]:
    candidates = [path] if path else [VENDORED_DATA]
    for candidate in candidates:
        if candidate and candidate.is_file():
            lines = candidate.read_text().splitlines()
            return [json.loads(line)["question"] for line in lines[:count]]
    raise click.ClickException(f"No GSM8K data found at {candidates}: pass --data PATH/test.jsonl.")


def chat_prompt_ids(target: ModelRunner, question: str) -> list[int]:
    messages = [{"role": "user", "content": f"{INSTRUCTION}\n\nQuestion: {question}"}]
    text = target.tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    return target.encode(text)


def run_method(name: str, draft, target, prompt, config, seed) -> dict:
    if name in ("hf-generate", "hf-assisted"):
        assistant = draft if name == "hf-assisted" else None
        stats = hf_generate_decode(target, prompt, config, seed, assistant).stats
        return {"new_tokens": stats.new_tokens, "wall_seconds": stats.wall_seconds}
    if name == "ar":
        out = autoregressive_decode(target, prompt, config, seed)
    else:
        kind, shape = name.split(":", 1)
        out = speculative_decode(draft, target, prompt, config, parse_k_config(shape), seed)
    return out.stats.as_dict()


def summarize(records: list[dict]) -> dict:
    tokens = sum(r["new_tokens"] for r in records)
    seconds = sum(r["wall_seconds"] for r in records)
    summary = {"new_tokens": tokens, "wall_seconds": seconds, "tokens_per_second": tokens / seconds}
    if "target_forwards" in records[0]:
        proposed = sum(r["draft_tokens_proposed"] for r in records)
        accepted = sum(r["draft_tokens_accepted"] for r in records)
        summary["acceptance_rate"] = accepted / proposed if proposed else None
        summary["tokens_per_target_forward"] = tokens / sum(r["target_forwards"] for r in records)
    return summary


def median_ratio_to_ar(records: dict[str, list[dict]], name: str) -> float:
    """Median over prompts of (method tokens/s) / (our AR tokens/s) on the same prompt: robust to
    a few prompts slowed by a burst of load on the shared machine."""
    from statistics import median

    def rate(r):
        return r["new_tokens"] / r["wall_seconds"]

    return median(rate(m) / rate(a) for m, a in zip(records[name], records["ar"]))


def print_table(temperature: float, summaries: dict[str, dict], records: dict[str, list[dict]]) -> None:
    base = summaries["ar"]["tokens_per_second"]
    click.echo(f"\ntemperature {temperature}")
    click.echo(f"{'method':<22}{'tokens/s':>10}{'vs our AR':>11}{'median/prompt':>15}{'accept':>9}{'tok/target fwd':>16}")
    for name, s in summaries.items():
        acc = s.get("acceptance_rate")
        tpf = s.get("tokens_per_target_forward")
        click.echo(
            f"{name:<22}{s['tokens_per_second']:>10.2f}{s['tokens_per_second'] / base:>10.2f}x"
            f"{median_ratio_to_ar(records, name):>14.2f}x"
            f"{(f'{acc:.2f}' if acc is not None else '-'):>9}{(f'{tpf:.2f}' if tpf is not None else '-'):>16}"
        )


def print_report(report: dict) -> None:
    """The tables of a JSON report written by an earlier run."""
    for temperature, result in report["results"].items():
        print_table(float(temperature), result["summary"], result["records"])
        if result.get("best_sd"):
            click.echo(f"best SD: {result['best_sd']}")


@click.command()
@click.option("--prompts", default=6, show_default=True, help="Number of GSM8K questions.")
@click.option("--max-new-tokens", default=64, show_default=True)
@click.option("--temperatures", default="0.2,1.0", show_default=True)
@click.option("--sd-ks", default="2,4,6", show_default=True, help="Draft lengths k of the SD sweep.")
@click.option("--k-config", default="2,2,1", show_default=True, help="MCSD token-tree shape.")
@click.option("--threads", default=2, show_default=True, help="torch threads.")
@click.option("--dtype", default="bfloat16", show_default=True)
@click.option("--no-peers", is_flag=True, help="Skip transformers generate() and assisted generation.")
@click.option("--data", type=click.Path(path_type=Path), default=None, help="GSM8K test.jsonl.")
@click.option("--out", type=click.Path(path_type=Path), default=None, help="Write the results as JSON.")
@click.option("--seed", default=0, show_default=True)
@click.option("--from-json", type=click.Path(exists=True, path_type=Path), default=None,
              help="Only print the tables of a JSON report written by --out.")
def main(prompts, max_new_tokens, temperatures, sd_ks, k_config, threads, dtype, no_peers, data, out, seed, from_json):
    if from_json:
        print_report(json.loads(from_json.read_text()))
        return
    torch.set_num_threads(threads)
    draft, target = load_pair("default-draft", "default-target", dtype=dtype)
    questions = gsm8k_questions(data, prompts)
    prompt_ids = [chat_prompt_ids(target, q) for q in questions]
    methods = ["ar"] + [f"sd:{','.join(['1'] * int(k))}" for k in sd_ks.split(",")]
    methods += [f"mcsd:{','.join(map(str, parse_k_config(k_config)))}"]
    if not no_peers:
        methods += ["hf-generate", "hf-assisted"]
    # Warm-up (first forwards allocate and pick kernels).
    for name in methods:
        run_method(name, draft, target, prompt_ids[0], DecodeConfig(max_new_tokens=4), seed)

    report = {
        "settings": {
            "prompts": prompts,
            "max_new_tokens": max_new_tokens,
            "threads": threads,
            "dtype": dtype,
            "prompt_tokens": [len(p) for p in prompt_ids],
            "draft": draft.name,
            "target": target.name,
        },
        "results": {},
    }
    for temperature in [float(t) for t in temperatures.split(",")]:
        config = DecodeConfig(max_new_tokens=max_new_tokens, temperature=temperature)
        records: dict[str, list[dict]] = {name: [] for name in methods}
        for index, prompt in enumerate(prompt_ids):
            for name in methods:
                record = run_method(name, draft, target, prompt, config, seed + index)
                records[name].append(record)
                click.echo(
                    f"T={temperature} prompt {index} {name}: {record['new_tokens']} tokens in "
                    f"{record['wall_seconds']:.1f} s",
                    err=True,
                )
        summaries = {name: summarize(rs) for name, rs in records.items()}
        sd_names = [n for n in methods if n.startswith("sd:")]
        best_sd = max(sd_names, key=lambda n: summaries[n]["tokens_per_second"]) if sd_names else None
        print_table(temperature, summaries, records)
        if best_sd:
            click.echo(f"best SD: {best_sd}")
        report["results"][str(temperature)] = {"summary": summaries, "best_sd": best_sd, "records": records}
    if out:
        write_text_atomically(out, json.dumps(report, indent=2))
        click.echo(f"wrote {out}")


if __name__ == "__main__":
    main()
