"""Per-request seeds derived from where a request sits in the search, not from when it runs.

A seed depends only on (run seed, problem id, node id, role, sample index), so any executor
or schedule that honours the request seed produces the same tree.
"""

from __future__ import annotations

import hashlib

from seed_tot.config import DecodeConfig
from seed_tot.requests import GenerationRequest


def request_seed(run_seed: int, problem_id: str, node_id: int, role: str, index: int) -> int:
    """A 63-bit seed, stable across processes and Python versions (no built-in hash())."""
    key = f"{run_seed}|{problem_id}|{node_id}|{role}|{index}".encode()
    return int.from_bytes(hashlib.sha256(key).digest()[:8], "big") & ((1 << 63) - 1)


def search_request(
    prompt_ids: list[int], config: DecodeConfig, run_seed: int, problem_id: str, node_id: int, role: str, index: int
) -> GenerationRequest:
    """A request of a search: seeded by its place in the tree, named "<problem>/n<node>/<role><index>",
    grouped by problem (executors keep one problem's rows from changing another's tokens)."""
    return GenerationRequest(
        prompt_ids=list(prompt_ids),
        config=config,
        seed=request_seed(run_seed, problem_id, node_id, role, index),
        request_id=f"{problem_id}/n{node_id}/{role}{index}",
        group=problem_id,
    )
