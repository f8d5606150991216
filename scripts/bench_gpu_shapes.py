"""Executors side by side on random-weight models of the default pair's shapes (timings only).

    python scripts/bench_gpu_shapes.py --device cuda --out /tmp/gpu_shapes

Builds the draft and target from scripts/gpu_configs/ (the default pair's config.json files) with
seeded random weights directly on --device, then times the same greedy workload through each
executor in one process, one after another: --requests requests of --prompt-tokens random prompt
tokens, each decoding exactly --new-tokens tokens (ignore_eos). With random weights a draft
agrees with the target by chance only, so the speculative methods show their cost, not their
gain: acceptance needs the real weights. Writes results.json and results.md to --out, with the
settings, the device's name and the library versions.
"""

from __future__ import annotations

import json
import platform
import random
import time
from pathlib import Path

import click
import torch
import transformers

from seed_tot.config import DecodeConfig
from seed_tot.requests import GenerationRequest
from seed_tot.runtime import ModelRunner
from seed_tot.scheduling.factory import make_executor
from seed_tot.scheduling.methods import method_named
from seed_tot.scheduling.seed.worker import RandomDraft

CONFIGS = Path(__file__).resolve().parent / "gpu_configs"
DRAFT_CONFIG = CONFIGS / "qwen2.5-coder-0.5b-instruct"
TARGET_CONFIG = CONFIGS / "qwen2.5-coder-1.5b-instruct"
METHODS = {"ar": {}, "batched": {}, "batched-lookup": {}, "batched-sd": {"k": 3}, "seed": {"k": 3, "num_workers": 3}}


def tiny_config_dir(out: Path, name: str, layers: int) -> Path:
    """A small config.json of the same architecture (for a quick run on a CPU)."""
    config = json.loads((TARGET_CONFIG / "config.json").read_text())
    config.update(hidden_size=64, intermediate_size=128, num_hidden_layers=layers, num_attention_heads=4,
                  num_key_value_heads=2, vocab_size=512, layer_types=["full_attention"] * layers,
                  bos_token_id=None, eos_token_id=None, pad_token_id=None, tie_word_embeddings=False)
    folder = out / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config))
    return folder


def workload(vocab_size: int, requests: int, prompt_tokens: int, new_tokens: int) -> list[GenerationRequest]:
    rng = random.Random(0)
    config = DecodeConfig(max_new_tokens=new_tokens, ignore_eos=True)
    return [
        GenerationRequest([rng.randrange(vocab_size) for _ in range(prompt_tokens)], config, seed=i)
        for i in range(requests)
    ]


def synchronize(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def time_method(method: str, target: ModelRunner, draft: RandomDraft, requests, device: str) -> dict:
    executor = make_executor(method, target, draft if method_named(method).draft_workers else draft.load(), **METHODS[method])
    try:
        executor.run(requests[:1])  # warm-up: kernels, workers spawned and loaded
        synchronize(device)
        started = time.perf_counter()
        results = executor.run(requests)
        synchronize(device)
        seconds = time.perf_counter() - started
    finally:
        executor.close()
    tokens = sum(len(r.token_ids) for r in results)
    return {"method": method, "options": METHODS[method], "seconds": round(seconds, 3), "new_tokens": tokens,
            "tokens_per_s": round(tokens / seconds, 1)}


@click.command()
@click.option("--device", default="cuda", show_default=True)
@click.option("--dtype", default="bfloat16", show_default=True)
@click.option("--requests", "n_requests", default=8, show_default=True)
@click.option("--prompt-tokens", default=64, show_default=True)
@click.option("--new-tokens", default=128, show_default=True)
@click.option("--methods", default=",".join(METHODS), show_default=True)
@click.option("--tiny", is_flag=True, help="Small models of the same architecture instead of the default shapes.")
@click.option("--out", type=click.Path(path_type=Path), required=True)
def main(device, dtype, n_requests, prompt_tokens, new_tokens, methods, tiny, out):
    out.mkdir(parents=True, exist_ok=True)
    draft_config, target_config = DRAFT_CONFIG, TARGET_CONFIG
    if tiny:
        draft_config, target_config = tiny_config_dir(out, "tiny_draft", 1), tiny_config_dir(out, "tiny_target", 2)
    draft = RandomDraft(str(draft_config), seed=1, dtype=dtype, device=device)
    target = RandomDraft(str(target_config), seed=0, dtype=dtype, device=device).load()
    requests = workload(target.model.config.vocab_size, n_requests, prompt_tokens, new_tokens)
    rows = []
    for method in methods.split(","):
        rows.append(time_method(method, target, draft, requests, device))
        click.echo(json.dumps(rows[-1]), err=True)
    ar = next((r["tokens_per_s"] for r in rows if r["method"] == "ar"), None)
    for row in rows:
        row["vs_ar"] = round(row["tokens_per_s"] / ar, 2) if ar else None
    settings = {
        "device": torch.cuda.get_device_name() if device.startswith("cuda") else platform.processor() or "cpu",
        "torch": torch.__version__, "transformers": transformers.__version__, "dtype": dtype,
        "requests": n_requests, "prompt_tokens": prompt_tokens, "new_tokens": new_tokens, "greedy": True,
        "draft_config": str(draft_config.name), "target_config": str(target_config.name), "random_weights": True,
        "tf32_matmul": torch.backends.cuda.matmul.allow_tf32,
    }
    (out / "results.json").write_text(json.dumps({"settings": settings, "rows": rows}, indent=2))
    lines = ["| method | options | seconds | new tokens | tokens/s | vs ar |", "|---|---|---|---|---|---|"]
    lines += [f"| {r['method']} | {r['options']} | {r['seconds']} | {r['new_tokens']} | {r['tokens_per_s']} | {r['vs_ar']} |"
              for r in rows]
    table = "\n".join(lines)
    (out / "results.md").write_text(f"Settings: {json.dumps(settings)}\n\n{table}\n")
    click.echo(table)


if __name__ == "__main__":
    main()
