"""When a judged vote is unsure enough to sample more chains.

A value-weighted vote scores each answer by the summed values of its chains. The winner's share of
all the answering chains' values says how sure the vote is: 1.0 when every valued chain agrees,
near 1/m when m answers split the weight evenly. Below a threshold the search draws another round
of sampled chains and votes again over all of them (seed-tot's `--escalate`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from seed_tot.search.answers import Selection


def winning_share(votes: Mapping[str, float]) -> float:
    """The top answer's share of the summed votes (0.0 when nothing voted)."""
    total = sum(votes.values())
    return max(votes.values()) / total if total > 0 else 0.0


def needs_more_chains(votes: Mapping[str, float], threshold: float) -> bool:
    """True when the vote's winning share is below `threshold` (a threshold of 0 never escalates)."""
    return winning_share(votes) < threshold


def unsure(selection: Selection, threshold: float) -> bool:
    """True when a voted answer is unsure enough for another round: its vote's winner holds less than
    `threshold`, or no chain answered at all (the search's own choice stood in). Never for a plan the
    task showed to reach its goal."""
    return selection.method in ("vote", "search") and needs_more_chains(selection.votes, threshold)
