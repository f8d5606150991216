"""Reading evaluator replies: numeric ratings ("Score: 7", "7/10", "I'd rate it 8 out of 10")
and verdict words ("Verdict: sure")."""

from __future__ import annotations

import re

_NUMBER = r"(\d+(?:\.\d+)?)"
# "7/10", "7 / 10", "8 out of 10"
_OUT_OF_TEN = re.compile(_NUMBER + r"\s*(?:/|out\s+of)\s*10\b", re.IGNORECASE)
# "Score: 7", "the coherency score is 7", "rating of 6", "I'd rate it 8", "The number is: 9"
_LABELLED = re.compile(
    r"\b(?:score|rating|rate(?:d)?(?:\s+(?:it|this|the\s+\w+))?|number|grade)"
    r"\s*(?:is|of|as|would\s+be|=|:|-)?\s*(?:a|an)?\s*[:\[\(]?\s*" + _NUMBER + r"\b",
    re.IGNORECASE,
)
_LEADING = re.compile(r"^\s*[\[\(]?" + _NUMBER + r"\b")


def parse_rating(text: str, low: float = 1.0, high: float = 10.0, prefer_last: bool = False) -> float | None:
    """A rating in [low, high] from free text, or None when no in-range rating is stated.

    Ratings are "N/10" or "N out of 10", a labelled number ("Score: N", "score is N", "rate it
    N") or a number that opens the reply. The first one stated counts, or with `prefer_last`
    the last one (for prompts that ask for the conclusion on the last line). A stated rating
    out of range gives None rather than a clipped value.
    """
    text = text.replace("*", "")  # markdown bold around the number
    matches = [m for pattern in (_OUT_OF_TEN, _LABELLED, _LEADING) for m in pattern.finditer(text)]
    if not matches:
        return None
    chosen = max(matches, key=lambda m: m.start()) if prefer_last else min(matches, key=lambda m: m.start())
    value = float(chosen.group(1))
    return value if low <= value <= high else None


def parse_verdict(text: str, values: dict[str, float]) -> float | None:
    """The value of the last verdict word in `text` (e.g. {"sure": 20, "likely": 1, ...}).

    A "Verdict: <word>" line wins over a verdict word elsewhere (the reasoning may mention
    "likely" in passing); the last one counts because the prompt asks for the verdict at the end.
    A reply that lists every option (an echo of the prompt) is not a verdict.
    """
    words = "|".join(re.escape(word) for word in values)
    text = text.replace("*", "")
    labelled = re.findall(r"verdict\s*(?:is)?\s*[:\-]?\s*\(?(" + words + r")\b", text, re.IGNORECASE)
    if len({word.lower() for word in labelled}) == len(values) > 1:  # the prompt's option list echoed
        return None
    found = labelled or re.findall(r"\b(" + words + r")\b", text, re.IGNORECASE)
    return float(values[found[-1].lower()]) if found else None
