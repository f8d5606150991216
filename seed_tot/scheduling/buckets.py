"""Which rows of a ragged prefill run in the same forward: buckets of similar segment lengths.

A ragged forward computes rows x widest row token slots (shorter rows are padded), so one forward
over a 1,000-token value prompt and ten 40-token thought prompts computes 11,000 slots for
1,400 tokens. Splitting the rows into several forwards removes padding but pays each forward's
fixed cost once more. `length_buckets` splits rows sorted by length into the runs that minimise
the total slots, a forward costing FORWARD_OVERHEAD_SLOTS slots on top of its rows x widest row.
Rows with nothing to compute need no forward.
"""

from __future__ import annotations

# What a forward costs beyond its token slots, in slots: a forward's fixed cost over the cost of
# one slot (measured: docs/many_problems.md#what-a-wide-forward-costs).
FORWARD_OVERHEAD_SLOTS = 10


def length_buckets(widths: list[int], overhead: int = FORWARD_OVERHEAD_SLOTS) -> list[list[int]]:
    """Row indices grouped so that sum over groups of (overhead + rows x widest) is least;
    groups are runs of the rows sorted by width (a run of zero widths costs nothing)."""
    return _cheapest_runs(widths, overhead)[1]


def bucketed_cost(widths: list[int], overhead: int = FORWARD_OVERHEAD_SLOTS) -> int:
    """Slots (plus overheads) the buckets of `widths` compute; 0 when nothing is to compute."""
    return _cheapest_runs(widths, overhead)[0]


def _cheapest_runs(widths: list[int], overhead: int) -> tuple[int, list[list[int]]]:
    """(least total cost, the runs of row indices sorted by width that reach it)."""
    order = sorted(range(len(widths)), key=lambda i: widths[i])
    sorted_widths = [widths[i] for i in order]
    best = [0] + [0] * len(order)  # best[i]: least cost of the first i sorted rows
    cut = [0] * (len(order) + 1)  # where the last run of the first i rows starts
    for end in range(1, len(order) + 1):
        widest = sorted_widths[end - 1]
        best[end], cut[end] = min(
            (best[start] + (overhead + (end - start) * widest if widest else 0), start) for start in range(end)
        )
    runs, end = [], len(order)
    while end:
        runs.append(order[cut[end] : end])
        end = cut[end]
    return best[-1], runs[::-1]
