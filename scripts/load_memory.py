"""Peak memory of loading a model: transformers' from_pretrained against seed-tot's loader.

Each load runs in its own child process (so one's peak cannot hide the other's) and reports its
resident memory after loading and its peak. Feeds docs/memory.md.

    python scripts/load_memory.py --model default-target --dtype bfloat16
"""

from __future__ import annotations

import json
import subprocess
import sys

import click

CHILD = r"""
import json, resource, sys, time
import torch
name, dtype, loader = sys.argv[1:4]
started = time.perf_counter()
if loader == "transformers":
    from transformers import AutoModelForCausalLM
    from seed_tot.models.loading import local_model_dir
    model = AutoModelForCausalLM.from_pretrained(local_model_dir(name), dtype=getattr(torch, dtype))
else:
    from seed_tot.models.loading import load_model
    model = load_model(name, dtype=dtype).model
rss = int(open("/proc/self/status").read().split("VmRSS:")[1].split()[0]) // 1024
print(json.dumps({"loader": loader, "dtype": dtype, "seconds": round(time.perf_counter() - started, 1),
                  "rss_after_load_mib": rss, "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024}))
"""


@click.command()
@click.option("--model", default="default-target", show_default=True, help="A default alias or a saved model folder.")
@click.option("--dtype", default="bfloat16", show_default=True, type=click.Choice(["float32", "bfloat16", "float16"]))
def main(model: str, dtype: str) -> None:
    for loader in ("transformers", "seed-tot"):
        out = subprocess.run([sys.executable, "-c", CHILD, model, dtype, loader], capture_output=True, text=True, check=True)
        click.echo(json.dumps({"model": model, **json.loads(out.stdout.strip().splitlines()[-1])}))


if __name__ == "__main__":
    main()
