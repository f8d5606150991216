"""A request's text as a task's Problem: the GSM8K question, the four Creative Writing sentences,
or a Blocksworld problem (PlanBench's statement, or a PDDL problem).

A problem's id is derived from its task and text, so one question sent twice with one seed grows
the same tree (every request seed derives from the run seed and the problem id).
"""

from __future__ import annotations

import hashlib
import re

from seed_tot.errors import SeedTotError
from seed_tot.task import Problem, Task

MAX_PROBLEM_CHARS = 20_000


class ProblemError(SeedTotError):
    """The text is not a problem the task can read; the message says what to send instead."""


def problem_id(task_name: str, text: str) -> str:
    return "api-" + hashlib.sha256(f"{task_name}|{text}".encode()).hexdigest()[:16]


def problem_from_text(task: Task, text: str) -> Problem:
    """The Problem `text` poses to `task` (no gold answer), or ProblemError."""
    text = text.strip()
    if not text:
        raise ProblemError("The problem is empty: send the problem as the last user message (or the prompt).")
    if len(text) > MAX_PROBLEM_CHARS:
        raise ProblemError(f"The problem has {len(text)} characters: send at most {MAX_PROBLEM_CHARS}.")
    pid = problem_id(task.name, text)
    if task.name == "creative_writing":
        return _creative_writing(pid, text)
    if task.name == "blocksworld":
        return _blocksworld(pid, text)
    return Problem(id=pid, question=text, gold=None, meta={"source": "api"})


def _creative_writing(pid: str, text: str) -> Problem:
    from seed_tot_tasks.creative_writing import N_SENTENCES, split_sentences

    line = " ".join(text.split())
    sentences = split_sentences(line)
    if len(sentences) != N_SENTENCES:
        raise ProblemError(f"Creative Writing needs exactly {N_SENTENCES} sentences ending in . ! or ? "
                           f"(found {len(sentences)}): send the four sentences the paragraphs must end with.")
    # as in the task's own data, gold holds the sentences: the prompts read them, the score counts them
    return Problem(id=pid, question=line, gold=sentences, meta={"source": "api"})


_FACT_PATTERNS = [  # PlanBench wording (tasks/blocksworld_text.py) read back into PDDL facts
    (re.compile(r"^the (\w+) block is on top of the (\w+) block$"), "on"),
    (re.compile(r"^the (\w+) block is on the table$"), "ontable"),
    (re.compile(r"^the (\w+) block is clear$"), "clear"),
    (re.compile(r"^i am holding the (\w+) block$"), "holding"),
    (re.compile(r"^the hand is empty$"), "handempty"),
]
_STATEMENT = re.compile(r"as initial conditions i have that,?(.*?)\.\s*my goal is to have that(.*?)\.?\s*$", re.S)


def _facts(body: str, where: str) -> list[tuple[str, ...]]:
    from seed_tot_tasks.blocksworld_text import COLOR_TO_OBJECT

    facts = []
    for clause in re.split(r",\s*|\s+and\s+", " ".join(body.split())):
        clause = clause.strip().rstrip(".")
        if not clause:
            continue
        for pattern, name in _FACT_PATTERNS:
            match = pattern.match(clause)
            if match:
                colors = match.groups()
                unknown = [c for c in colors if c not in COLOR_TO_OBJECT]
                if unknown:
                    raise ProblemError(f"Unknown block color {unknown[0]!r} in the {where}: use "
                                       f"{', '.join(COLOR_TO_OBJECT)}.")
                facts.append((name, *(COLOR_TO_OBJECT[c] for c in colors)))
                break
        else:
            raise ProblemError(f"Cannot read {clause!r} in the {where}: write facts as PlanBench does, e.g. "
                               "'the red block is on top of the blue block', 'the hand is empty'.")
    if not facts:
        raise ProblemError(f"The {where} names no fact.")
    return facts


def _pddl(init: list[tuple[str, ...]], goal: list[tuple[str, ...]]) -> str:
    objects = sorted({obj for fact in init + goal for obj in fact[1:]})
    init_text = "\n".join(f"({' '.join(fact)})" for fact in init)
    goal_text = "\n".join(f"({' '.join(fact)})" for fact in goal)
    return (f"(define (problem api)\n(:domain blocksworld-4ops)\n(:objects {' '.join(objects)} )\n"
            f"(:init\n{init_text}\n)\n(:goal\n(and\n{goal_text})\n)\n)\n")


def _blocksworld(pid: str, text: str) -> Problem:
    from seed_tot_tasks.blocksworld_text import statement_text
    from seed_tot_tasks.pddl import parse_problem

    if text.lstrip().startswith("(define"):
        pddl = text
    else:
        match = _STATEMENT.search(text.lower())
        if match is None:
            raise ProblemError("A Blocksworld problem reads 'As initial conditions I have that, <facts>. My goal is "
                               "to have that <facts>.' (PlanBench's wording) or is a PDDL problem '(define (problem ...'.")
        pddl = _pddl(_facts(match.group(1), "initial conditions"), _facts(match.group(2), "goal"))
    try:
        instance = parse_problem(pddl)
    except (SeedTotError, ValueError, IndexError, KeyError) as exc:
        raise ProblemError(f"The PDDL problem cannot be read ({exc}): send a blocksworld-4ops problem.") from None
    return Problem(id=pid, question=statement_text(instance.init, instance.goal), gold=[],
                   meta={"instance_pddl": pddl, "n_steps": None, "source": "api"})
