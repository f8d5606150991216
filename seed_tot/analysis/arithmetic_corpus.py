"""A synthetic corpus of multi-step integer arithmetic word problems with worked solutions.

Each problem is a short story question, a solution that states every intermediate step as
`a op b = c` inside a sentence, and a final line `#### <answer>`, in the style of GSM8K:

    Q: Tom has 37 apples. He buys 4 bags of 12 apples. How many apples does he have now?
    A: He buys 4*12=48 apples. Now he has 37+48=85 apples.
    #### 85

Problem `index` of a split is a pure function of (seed, index), so a corpus is reproducible from
its seed alone; `disjoint_split` drops from one split every question that occurs in others, so
held-out sets never share a question with the training text even if two seeds collide.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

NAMES = [("Tom", "he"), ("Ana", "she"), ("Li", "he"), ("Mia", "she"), ("Sam", "he"), ("Eva", "she"),
         ("Raj", "he"), ("Zoe", "she"), ("Ben", "he"), ("Ida", "she")]
ITEMS = ["apples", "pens", "cards", "eggs", "books", "coins", "shells", "stamps", "cups", "rocks"]
ANSWER_MARK = "#### "
_STEP = re.compile(r"(\d+)([-+*/])(\d+)=(\d+)")


@dataclass(frozen=True)
class ArithmeticProblem:
    question: str  # the story, without the "Q: " prefix
    solution: str  # worked steps, without the "A: " prefix
    answer: int

    @property
    def prompt(self) -> str:
        """What the model is given: it continues with the solution and the answer line."""
        return f"Q: {self.question}\nA:"

    @property
    def completion(self) -> str:
        return f" {self.solution}\n{ANSWER_MARK}{self.answer}\n"

    @property
    def text(self) -> str:
        return self.prompt + self.completion


def _buy_packs(rng: random.Random, name: str, he: str, item: str) -> ArithmeticProblem:
    a, b, c = rng.randint(10, 99), rng.randint(2, 9), rng.randint(2, 20)
    t = b * c
    return ArithmeticProblem(
        f"{name} has {a} {item}. {he.capitalize()} buys {b} bags of {c} {item}. How many {item} does {he} have now?",
        f"{he.capitalize()} buys {b}*{c}={t} {item}. Now {he} has {a}+{t}={a + t} {item}.", a + t)


def _give_and_find(rng: random.Random, name: str, he: str, item: str) -> ArithmeticProblem:
    a = rng.randint(20, 99)
    b, c = rng.randint(1, a - 1), rng.randint(2, 60)
    return ArithmeticProblem(
        f"{name} has {a} {item}. {he.capitalize()} gives away {b} {item} and then finds {c} more. How many {item} does {he} have?",
        f"After giving some away {he} has {a}-{b}={a - b} {item}. After finding more {he} has {a - b}+{c}={a - b + c} {item}.",
        a - b + c)


def _boxes_eaten(rng: random.Random, name: str, he: str, item: str) -> ArithmeticProblem:
    a, b = rng.randint(2, 9), rng.randint(3, 25)
    t = a * b
    c = rng.randint(1, t - 1)
    return ArithmeticProblem(
        f"{name} buys {a} boxes with {b} {item} in each box and loses {c} {item}. How many {item} are left?",
        f"{name} buys {a}*{b}={t} {item}. After losing some there are {t}-{c}={t - c} {item} left.", t - c)


def _share_and_add(rng: random.Random, name: str, he: str, item: str) -> ArithmeticProblem:
    b, q, c = rng.randint(2, 9), rng.randint(2, 20), rng.randint(1, 30)
    a = b * q
    return ArithmeticProblem(
        f"{name} shares {a} {item} equally among {b} friends. Each friend then gets {c} more {item}. How many {item} does each friend have?",
        f"Each friend gets {a}/{b}={q} {item}. Then each friend has {q}+{c}={q + c} {item}.", q + c)


def _three_steps(rng: random.Random, name: str, he: str, item: str) -> ArithmeticProblem:
    a, b, c = rng.randint(10, 99), rng.randint(2, 9), rng.randint(2, 15)
    t = b * c
    d = rng.randint(1, a + t - 1)
    return ArithmeticProblem(
        f"{name} has {a} {item}. {he.capitalize()} buys {b} packs of {c} {item} and then gives {d} {item} to a friend. How many {item} does {he} have left?",
        f"{he.capitalize()} buys {b}*{c}={t} {item}. Then {he} has {a}+{t}={a + t} {item}. "
        f"After giving some away {he} has {a + t}-{d}={a + t - d} {item}.", a + t - d)


TEMPLATES: list[Callable[[random.Random, str, str, str], ArithmeticProblem]] = [
    _buy_packs, _give_and_find, _boxes_eaten, _share_and_add, _three_steps]


def make_problem(seed: int, index: int) -> ArithmeticProblem:
    """Problem `index` of the split with `seed` (a pure function of both)."""
    rng = random.Random(f"arithmetic:{seed}:{index}")
    name, he = rng.choice(NAMES)
    return rng.choice(TEMPLATES)(rng, name, he, rng.choice(ITEMS))


def make_split(seed: int, count: int, start: int = 0) -> list[ArithmeticProblem]:
    return [make_problem(seed, i) for i in range(start, start + count)]


def disjoint_split(seed: int, count: int, exclude: Iterable[ArithmeticProblem]) -> list[ArithmeticProblem]:
    """`count` problems of `seed` whose questions occur neither in `exclude` nor twice in the split."""
    seen = {p.question for p in exclude}
    chosen, index = [], 0
    while len(chosen) < count:
        problem = make_problem(seed, index)
        index += 1
        if problem.question not in seen:
            seen.add(problem.question)
            chosen.append(problem)
    return chosen


def final_answer(text: str) -> int | None:
    """The integer after the first '#### ' of a generated solution (None when there is none)."""
    match = re.search(re.escape(ANSWER_MARK) + r"(-?\d+)", text)
    return int(match.group(1)) if match else None


def solution_steps(solution: str) -> list[tuple[int, str, int, int]]:
    """The `a op b = c` steps written in a solution, as (a, op, b, c)."""
    return [(int(a), op, int(b), int(c)) for a, op, b, c in _STEP.findall(solution)]


def step_is_correct(a: int, op: str, b: int, c: int) -> bool:
    result = {"+": a + b, "-": a - b, "*": a * b, "/": a // b if b and a % b == 0 else None}[op]
    return result == c
