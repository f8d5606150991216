"""Which prompts of a batch prefill a common prefix once: the plan of a two-stage ragged prefill.

A prefill stage computes, per length bucket, rows x widest row slots plus a forward's fixed cost
(seed_tot/scheduling/buckets.py), so sharing pays only when it shrinks that total. Stage 1 runs one row per group over the group's common
prefix; the rows are then repeated (a copy of the KV, no compute) and stage 2 runs one row per
prompt over the rest. Groups are runs of the sorted prompts: for every threshold on the common
prefix of sorted neighbours the plan is built and costed, and the cheapest one wins, or no plan
when a single stage computes fewer slots. Every prompt keeps at least one token for stage 2,
whose logits are the prompt's next-token logits.
"""

from __future__ import annotations

from seed_tot.decoding.drafters import common_prefix_length
from seed_tot.scheduling.buckets import bucketed_cost

Group = tuple[int, list[int]]  # (shared prefix length, indices of the prompts sharing it)


def stage_cost(widths: list[int]) -> int:
    """Slots one prefill stage computes, its rows split into length buckets (seed_tot/scheduling/buckets.py)."""
    return bucketed_cost(widths)


def plan_cost(prompts: list[list[int]], groups: list[Group]) -> int:
    heads = [length for length, _ in groups]
    tails = [len(prompts[i]) - length for length, members in groups for i in members]
    return stage_cost(heads) + stage_cost(tails)


def _groups_at(prompts: list[list[int]], order: list[int], shared: list[int], threshold: int) -> list[Group]:
    """Runs of sorted prompts whose neighbours share >= threshold tokens; a run shares its minimum."""
    groups, members, length = [], [order[0]], len(prompts[order[0]]) - 1
    for position, index in enumerate(order[1:]):
        if shared[position] >= threshold:
            members.append(index)
            length = min(length, shared[position])
        else:
            groups.append((length, members))
            members, length = [index], len(prompts[index]) - 1
    groups.append((length, members))
    return groups


def plan_prefix_sharing(prompts: list[list[int]]) -> list[Group] | None:
    """The cheapest two-stage plan for distinct, non-empty prompts, or None when one stage is cheaper."""
    if len(prompts) < 2 or not all(prompts):
        return None
    order = sorted(range(len(prompts)), key=lambda i: prompts[i])
    shared = [
        min(common_prefix_length(prompts[a], prompts[b]), len(prompts[a]) - 1, len(prompts[b]) - 1)
        for a, b in zip(order, order[1:])
    ]
    best, best_cost = None, stage_cost([len(p) for p in prompts])
    for threshold in sorted(set(shared)):
        groups = _groups_at(prompts, order, shared, threshold)
        cost = plan_cost(prompts, groups)
        if cost < best_cost:
            best, best_cost = groups, cost
    return best
