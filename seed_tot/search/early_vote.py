"""When a vote is decided before all its chains have ended.

A plain vote counts one vote per answering chain; a judged vote counts each answering chain with
its judge's value, a probability, so at most 1. Once the leading answer's weight exceeds the
runner-up's by more than every chain still open could add (1 each), no ending of those chains can
change the winner, so they can be cancelled: the answer is the one the whole vote would give, at
fewer tokens and sooner. Where a second round may follow an unsure vote, the first round is also
decided only when the winner's share stays at or above the threshold even if every open chain
answered otherwise with the most weight it could carry, so the second round is drawn exactly where
it would have been.
"""

from __future__ import annotations

from collections import defaultdict

MOST_WEIGHT = 1.0  # the most one chain's vote can weigh: one plain vote, or a judge's probability


def vote_decided(votes: list[tuple[str | None, float]], running: int, escalate_below: float | None = None) -> bool:
    """`votes`: (answer, weight) of each chain that has ended, and of any vote already cast (answer
    None: it casts none); `running`: chains still open; `escalate_below`: the share under which a
    second round is drawn (None: none is)."""
    weights: dict[str, float] = defaultdict(float)
    for answer, weight in votes:
        if answer is not None:
            weights[answer] += weight
    if not weights:
        return False
    ranked = sorted(weights.values(), reverse=True)
    top, runner_up = ranked[0], (ranked[1] if len(ranked) > 1 else 0.0)
    open_weight = running * MOST_WEIGHT
    if top <= runner_up + open_weight:
        return False
    return escalate_below is None or top / (sum(weights.values()) + open_weight) >= escalate_below


def plain_vote_decided(answers: list[str | None], running: int, escalate_below: float | None = None) -> bool:
    """vote_decided with one vote per answering chain."""
    return vote_decided([(answer, 1.0) for answer in answers], running, escalate_below)
