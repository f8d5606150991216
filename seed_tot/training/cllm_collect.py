"""Collect Jacobi trajectories for a list of prompts into a JSONL file, resumably.

Each prompt's blocks are appended in one write; a rerun skips prompts already in the file and
drops a last line cut short by an interrupted write.
"""

from __future__ import annotations

import json
from pathlib import Path

from tqdm import tqdm

from seed_tot.runtime import ModelRunner
from seed_tot.training.cllm_trajectory import BlockTrajectory, collect_trajectories


def read_blocks(path: Path) -> list[BlockTrajectory]:
    """The blocks in `path`, after truncating an incomplete last line."""
    if not path.is_file():
        return []
    data = path.read_bytes()
    complete = data[: data.rfind(b"\n") + 1]
    if len(complete) != len(data):
        path.write_bytes(complete)
    return [BlockTrajectory.from_json(json.loads(line)) for line in complete.decode().splitlines() if line.strip()]


def collect_to_file(
    runner: ModelRunner, prompts: list[tuple[str, list[int]]], path: Path, block_size: int, max_new_tokens: int,
    progress: bool = True,
) -> list[BlockTrajectory]:
    """Collect every prompt not yet in `path` (id, token ids); all blocks in the file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    blocks = read_blocks(path)
    done = {block.prompt_id for block in blocks}
    todo = [(pid, ids) for pid, ids in prompts if pid not in done]
    with open(path, "a") as sink:
        for prompt_id, ids in tqdm(todo, desc="cllm trajectories", disable=not progress, initial=len(prompts) - len(todo), total=len(prompts)):
            new = collect_trajectories(runner, ids, block_size, max_new_tokens, prompt_id)
            sink.write("".join(json.dumps(block.to_json()) + "\n" for block in new))
            sink.flush()
            blocks += new
    return blocks
