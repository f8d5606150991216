"""Blocksworld in PlanBench's natural language: render facts and actions, read actions back.

Wording follows PlanBench (karthikv792/LLMs-Planning, blocksworld config): objects a, b, c, ...
are "the red block", "the blue block", ...; facts are listed in sorted order, joined by ", "
with " and " before the last one.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from seed_tot_tasks.pddl import Action, Fact

BLOCK_COLORS = {
    "a": "red", "b": "blue", "c": "orange", "d": "yellow", "e": "white", "f": "magenta",
    "g": "black", "h": "cyan", "i": "green", "j": "violet", "k": "silver", "l": "gold",
}  # fmt: skip
COLOR_TO_OBJECT = {color: obj for obj, color in BLOCK_COLORS.items()}

FACT_TEMPLATES = {
    "ontable": "the {} is on the table",
    "clear": "the {} is clear",
    "handempty": "the hand is empty",
    "on": "the {} is on top of the {}",
    "holding": "I am holding the {}",
}
ACTION_TEMPLATES = {
    "pick-up": "pick up the {}",
    "put-down": "put down the {}",
    "stack": "stack the {} on top of the {}",
    "unstack": "unstack the {} from on top of the {}",
}
ACTION_ARITY = {"pick-up": 1, "put-down": 1, "stack": 2, "unstack": 2}


def block_name(obj: str) -> str:
    return f"{BLOCK_COLORS.get(obj, obj)} block"


def join_clauses(clauses: list[str]) -> str:
    """"x", "x and y", "x, y and z" as PlanBench joins facts."""
    if len(clauses) <= 1:
        return "".join(clauses)
    return ", ".join(clauses[:-1]) + " and " + clauses[-1]


def fact_text(fact: Fact) -> str:
    return FACT_TEMPLATES[fact[0]].format(*(block_name(o) for o in fact[1:]))


def facts_text(facts: Iterable[Fact]) -> str:
    """Facts in PlanBench order (sorted by predicate_arg1_arg2) as one sentence body."""
    ordered = sorted(facts, key=lambda fact: "_".join(fact))
    return join_clauses([fact_text(f) for f in ordered])


def statement_text(init: Iterable[Fact], goal: Iterable[Fact]) -> str:
    return f"As initial conditions I have that, {facts_text(init)}.\nMy goal is to have that {facts_text(goal)}."


def action_text(action: Action) -> str:
    return ACTION_TEMPLATES[action.name].format(*(block_name(o) for o in action.args))


_VERB = re.compile(r"\b(unstack|stack|pick\s*up|put\s*down)\b")
_VERB_TO_ACTION = {"unstack": "unstack", "stack": "stack", "pickup": "pick-up", "putdown": "put-down"}
_CLAUSE_END = re.compile(r"[\n.;!?]")
_COLOR_NAMES = "|".join(COLOR_TO_OBJECT)
# A block reference: a color ("red block", "red") or a single-letter object ("block a", "(a)").
_REFERENCE = re.compile(rf"\b(?:({_COLOR_NAMES})\b|([a-z])\b(?!\s+(?:block|{_COLOR_NAMES})\b))")


def _normalise(text: str) -> str:
    """Lower case; hyphens, underscores, parentheses and quotes become spaces; clause ends kept."""
    text = text.lower().replace("-", " ").replace("_", " ")
    return re.sub(r"[^a-z0-9\n.;!? ]", " ", text)


def parse_action(text: str) -> Action | None:
    """The first action named in free text, or None when none can be read.

    Accepts PlanBench wording in any case/punctuation ("Unstack the red block from on top of the
    blue block."), short forms ("stack red on blue", "pick-up block a") and PDDL ("(unstack a b)").
    """
    for clause in _CLAUSE_END.split(_normalise(text)):
        verbs = list(_VERB.finditer(clause))
        if not verbs:
            continue
        first = verbs[0]
        end = verbs[1].start() if len(verbs) > 1 else len(clause)
        name = _VERB_TO_ACTION[re.sub(r"\s+", "", first.group(1))]
        objects = []
        for match in _REFERENCE.finditer(clause[first.end():end]):
            color, letter = match.groups()
            objects.append(COLOR_TO_OBJECT[color] if color else letter)
        if len(objects) != ACTION_ARITY[name]:
            return None
        return Action(name, tuple(objects))
    return None
