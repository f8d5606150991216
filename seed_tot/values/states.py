"""Where the states of a solution end: a state is the solution up to the end of one of its lines.

A chain of thought written as lines (steps, equations, sentences on their own lines) has one state
per non-empty line: the text from its start to that line's end. The whole chain is the last state.
A tree's state (its steps so far) is one such text; its last state is the state itself.
"""

from __future__ import annotations


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
