"""When a plain vote is decided before all its chains have ended.

A plain vote counts one vote per answering chain. Once the leading answer has more votes than the
runner-up and every chain still running together, no ending of those chains can change the winner,
so they can be cancelled: the answer is the one the whole vote would give, at fewer tokens and
sooner. Where a second round may follow an unsure vote, the first round is also decided only when
the winner's share stays at or above the threshold even if every chain still running answered
otherwise, so the second round is drawn exactly where it would have been.
"""

from __future__ import annotations

from collections import Counter


def plain_vote_decided(answers: list[str | None], running: int, escalate_below: float | None = None) -> bool:
    """`answers`: the vote of each chain that has ended (None: it casts none); `running`: chains
    still decoding; `escalate_below`: the share under which a second round is drawn (None: none is)."""
    counts = Counter(answer for answer in answers if answer is not None)
    if not counts:
        return False
    ranked = counts.most_common(2)
    top, runner_up = ranked[0][1], (ranked[1][1] if len(ranked) > 1 else 0)
    if top <= runner_up + running:
        return False
    return escalate_below is None or top / (sum(counts.values()) + running) >= escalate_below
