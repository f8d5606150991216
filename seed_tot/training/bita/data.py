"""Self-distillation data: the frozen model's own greedy continuations of the training prompts.

One JSON line per prompt ({"key", "prompt_ids", "response_ids"}), appended and fsynced per
batch; a rerun skips keys already in the file, so an interrupted collection loses nothing.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from seed_tot.config import DecodeConfig
from seed_tot.errors import ConfigError
from seed_tot.requests import Executor, GenerationRequest


@dataclass(frozen=True)
class Sample:
    key: str
    prompt_ids: list[int]
    response_ids: list[int]


def read_samples(path: str | Path) -> list[Sample]:
    """Samples of a data file (empty when it does not exist yet); a torn last line is ignored."""
    path = Path(path)
    if not path.is_file():
        return []
    samples = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            samples.append(Sample(str(row["key"]), list(row["prompt_ids"]), list(row["response_ids"])))
        except (json.JSONDecodeError, KeyError, TypeError):
            if number == len(path.read_text().splitlines()):
                continue  # an interrupted write: that prompt is collected again
            raise ConfigError(f"{path} line {number} is not a BiTA training sample: delete the file to collect afresh.") from None
    return samples


def append_samples(path: Path, samples: list[Sample]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        for s in samples:
            handle.write(json.dumps({"key": s.key, "prompt_ids": s.prompt_ids, "response_ids": s.response_ids}) + "\n")
        handle.flush()
        os.fsync(handle.fileno())


def collect_samples(
    executor: Executor,
    prompts: list[tuple[str, list[int]]],
    path: str | Path,
    max_new_tokens: int,
    batch_size: int = 8,
    on_batch: Callable[[int], None] | None = None,
) -> list[Sample]:
    """Greedy continuations of every (key, prompt ids) not yet in `path`, `batch_size` prompts per
    executor call; returns all samples of the file afterwards."""
    path = Path(path)
    done = {s.key for s in read_samples(path)}
    todo = [(key, ids) for key, ids in prompts if key not in done]
    config = DecodeConfig(max_new_tokens=max_new_tokens, temperature=0.0)
    for start in range(0, len(todo), batch_size):
        batch = todo[start : start + batch_size]
        requests = [GenerationRequest(prompt_ids=ids, config=config, seed=0, request_id=key) for key, ids in batch]
        results = executor.run(requests)
        append_samples(path, [Sample(key, ids, list(r.token_ids)) for (key, ids), r in zip(batch, results)])
        if on_batch is not None:
            on_batch(len(batch))
    return read_samples(path)
