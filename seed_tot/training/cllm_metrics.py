"""The CLLM paper's convergence counts, from Jacobi trajectories (load-independent).

Greedy Jacobi keeps a correct prefix correct, so after forward i a block's converged prefix is the
prefix its state shares with the fixed point. Fast-forwarded tokens: how many tokens a forward
adds to that prefix (more than one is the speed-up). Stationary tokens: tokens that became correct
and stayed so while a token before them was still wrong.
"""

from __future__ import annotations

from seed_tot.training.cllm_loss import first_difference
from seed_tot.training.cllm_trajectory import BlockTrajectory


def block_counts(block: BlockTrajectory) -> dict:
    y, states = block.fixed_point, block.states
    prefixes = [first_difference(s, y) for s in states] + [len(y)]  # prefix before each forward, then at the end
    fast_forwarded = [after - before for before, after in zip(prefixes, prefixes[1:])]
    stationary = 0
    for j in range(len(y)):
        converged_at = next(i for i, p in enumerate(prefixes) if p > j)
        correct_from = len(states)
        while correct_from > 0 and states[correct_from - 1][j] == y[j]:
            correct_from -= 1
        stationary += correct_from < converged_at
    return {"tokens": len(y), "forwards": len(states), "max_fast_forward": max(fast_forwarded, default=0), "stationary": stationary}


def summarize(blocks: list[BlockTrajectory]) -> dict:
    counts = [block_counts(b) for b in blocks]
    tokens, forwards = sum(c["tokens"] for c in counts), sum(c["forwards"] for c in counts)
    return {
        "blocks": len(blocks),
        "tokens": tokens,
        "forwards": forwards,
        "tokens_per_forward": tokens / max(forwards, 1),
        "mean_max_fast_forward": sum(c["max_fast_forward"] for c in counts) / max(len(counts), 1),
        "stationary_tokens": sum(c["stationary"] for c in counts),
        "stationary_fraction": sum(c["stationary"] for c in counts) / max(tokens, 1),
    }
