"""Where the states of a solution end: a state is the solution up to the end of one of its lines.

A chain of thought written as lines (steps, equations, sentences on their own lines) has one state
per non-empty line: the text from its start to that line's end. The whole chain is the last state.
A tree's state (its steps so far) is one such text; its last state is the state itself.

A state that gives its answer is read at the answer rather than at its last token: the target's
hidden state at the answer's own tokens says more about whether the answer is right than the
closing words after it do (measured: docs/judge.md#where-the-judge-reads-a-chain).
"""

from __future__ import annotations

import re


def state_ends(text: str) -> list[int]:
    """Character offsets where the states of `text` end: after each non-empty line (stripped of
    trailing white space), the last one being the end of the text's last non-blank character."""
    ends, start = [], 0
    for line in text.split("\n"):
        stripped = line.rstrip()
        if stripped.strip():
            ends.append(start + len(stripped))
        start += len(line) + 1
    return ends


def last_token_before(offsets: list[tuple[int, int]], end: int) -> int:
    """Index of the token that holds character `end - 1` (the last token of the text before `end`):
    the last token starting before `end`."""
    index = -1
    for i, (start, _) in enumerate(offsets):
        if start < end:
            index = i
        else:
            break
    if index < 0:
        raise ValueError(f"no token starts before character {end}")
    return index


def answer_end(text: str, answer: str | None) -> int | None:
    """Character offset just after the last occurrence of `answer` in `text` (None without one); a number
    also matches itself written with thousands separators."""
    if not answer:
        return None
    at = text.rfind(answer)
    if at >= 0:
        return at + len(answer)
    # a normalised number ("1200") written with thousands separators ("1,200")
    loose = "".join(re.escape(c) + (",?" if c.isdigit() and n.isdigit() else "") for c, n in zip(answer, answer[1:] + " "))
    matches = list(re.finditer(loose, text))
    return matches[-1].end() if matches else None


def reading_ends(text: str, answer: str | None) -> list[int]:
    """Where the judge reads each state of `text`: its line ends, the last one moved to the end of
    the answer when the text gives one (`answer`: the answer the text states, else None)."""
    ends = state_ends(text)
    end = answer_end(text, answer)
    if ends and end is not None:
        ends[-1] = end
    return ends
