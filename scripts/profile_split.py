"""Where a run's decode steps spend their time, from a py-spy profile of the run.

Record the run with native frames (its main thread holds the decode loop; oneDNN's and OpenMP's
helper threads are not Python threads, so their time shows as the main thread's waits):

    py-spy record --rate 25 --native --format raw -o profile.txt -- \
        seed-tot gsm8k --start 300 --limit 4 --concurrency 4 --out runs/profiled
    python scripts/profile_split.py profile.txt

The split is by the innermost matching frame of each main-thread sample inside a decode step:
linear layers (packed or plain), attention, the rest of the model's forward (norms, rotary,
residual adds, the cache), and the step's work outside the model (drafting, sampling, verifying,
Python). Samples outside any decode step (imports, loading, the search between steps) are
counted apart.
"""

from __future__ import annotations

import gzip
import json
from collections import Counter
from pathlib import Path

import click

STEP = "DecodeSession.step"
PARTS = (  # (part, frame markers), the first marker found from the innermost frame outwards wins
    ("linear layers", ("PackedLinear.forward", "Linear.forward (torch/nn/modules/linear.py")),
    ("attention", ("sdpa_attention_forward", "eager_attention_forward", "scaled_dot_product_attention")),
    ("rest of the model forward", ("ForCausalLM.forward",)),
)


def read_raw(path: Path) -> list[tuple[list[str], int]]:
    """py-spy's raw (collapsed) format: one `[thread;]frame;...;frame count` line per stack (the
    thread only where it was recorded with --threads); gzipped where the name ends in .gz."""
    text = gzip.decompress(path.read_bytes()).decode() if path.suffix == ".gz" else path.read_text()
    stacks = []
    for line in text.splitlines():
        stack, _, count = line.rpartition(" ")
        if stack:
            stacks.append((stack.split(";"), int(count)))
    return stacks


def part_of(frames: list[str]) -> str:
    if not any(STEP in frame for frame in frames):
        return "outside decode steps"
    for frame in reversed(frames):
        for part, markers in PARTS:
            if any(marker in frame for marker in markers):
                return part
    return "step outside the model (drafts, sampling, verify, Python)"


def split(stacks: list[tuple[list[str], int]]) -> Counter:
    """Counts by part of the main thread's samples, or of every sample where no thread was recorded
    (only the main thread runs decode steps, so other threads' samples fall outside them)."""
    with_threads = any(frames[0].startswith("thread (") for frames, _ in stacks if frames)
    counts: Counter = Counter()
    for frames, count in stacks:
        if frames and (not with_threads or "MainThread" in frames[0]):
            counts[part_of(frames)] += count
    return counts


@click.command()
@click.argument("profile", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--json-out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Also write the counts and shares as JSON.")
def main(profile: Path, json_out: Path | None) -> None:
    counts = split(read_raw(profile))
    in_steps = sum(n for part, n in counts.items() if part != "outside decode steps")
    if not in_steps:
        raise click.ClickException(f"{profile} holds no main-thread sample inside a decode step: record the run "
                                   "with py-spy's --native and --format raw.")
    rows = []
    for part, n in counts.most_common():
        share = None if part == "outside decode steps" else round(n / in_steps, 3)
        rows.append({"part": part, "samples": n, "share_of_decode_steps": share})
        click.echo(f"{part:58s} {n:6d}  {'' if share is None else f'{share:.1%}'}")
    if json_out:
        json_out.write_text(json.dumps({"profile": str(profile), "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
