"""The target's own confidence in each token of a reply it wrote: one forward, no decoding."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Callable

import torch


def token_confidence(target, prompt: list[int], reply: list[int]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(log-probability of each reply token, top-1 probability, entropy) under the target, one forward."""
    ids = torch.tensor([prompt + reply])
    with torch.no_grad():
        logits = target.forward(ids)[0, len(prompt) - 1 : -1].float()
    logp = torch.log_softmax(logits, -1)
    written = logp.gather(1, torch.tensor(reply)[:, None]).squeeze(1)
    return written, logp.max(-1).values.exp(), -(logp.exp() * logp).sum(-1)


def read_each_problem(target, items, out: Path, rows_of: Callable[[Any, list[int]], list[dict]]) -> None:
    """For each problem OUT.jsonl holds no row of yet (a rerun resumes): `rows_of(item, prompt ids)`
    appended to OUT.jsonl, with a line on stderr."""
    from seed_tot.reasoning.prompting import PromptFormatter

    formatter = PromptFormatter(target.tokenizer)
    done = {json.loads(line)["problem_id"] for line in out.read_text().splitlines()} if out.is_file() else set()
    for item in items:
        if item.problem_id in done:
            continue
        rows = rows_of(item, formatter.encode_text(formatter.reply_prefix(item.message)))
        with out.open("a") as handle:
            handle.writelines(json.dumps(row) + "\n" for row in rows)
        print(f"{item.problem_id}: {len(rows)} rows", file=sys.stderr)
