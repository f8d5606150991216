"""A small STRIPS subset of PDDL: parse a domain and a problem, apply actions, validate plans.

Enough for PlanBench's Blocksworld (positive conjunctive preconditions, add and delete effects,
untyped parameters). Facts are tuples such as ("on", "a", "b") or ("handempty",).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from itertools import permutations

from seed_tot.errors import SeedTotError

Fact = tuple[str, ...]
State = frozenset[Fact]
SExpr = str | list["SExpr"]


@dataclass(frozen=True)
class Operator:
    name: str
    parameters: tuple[str, ...]  # variable names, e.g. ("?ob", "?underob")
    preconditions: tuple[Fact, ...]  # checked in the order the domain lists them
    add: tuple[Fact, ...]
    delete: tuple[Fact, ...]


@dataclass(frozen=True)
class Domain:
    name: str
    operators: dict[str, Operator]


@dataclass(frozen=True)
class PlanningProblem:
    name: str
    objects: tuple[str, ...]
    init: State
    goal: frozenset[Fact]


@dataclass(frozen=True)
class Action:
    name: str  # operator name, e.g. "unstack"
    args: tuple[str, ...]  # object names, e.g. ("a", "b")

    def pddl(self) -> str:
        return "(" + " ".join((self.name, *self.args)) + ")"


@dataclass(frozen=True)
class PlanCheck:
    executable: bool  # every action's preconditions held in sequence
    reaches_goal: bool  # executable and the final state holds every goal fact
    steps_done: int  # actions applied before the first failure (len(plan) when executable)
    final_state: State
    reason: str  # why it failed, "" when it reaches the goal

    @property
    def valid(self) -> bool:
        return self.executable and self.reaches_goal


def tokenize(text: str) -> list[str]:
    """PDDL tokens: parentheses and atoms, comments (;...) removed, lower-cased."""
    lines = [line.split(";", 1)[0] for line in text.splitlines()]
    return " ".join(lines).replace("(", " ( ").replace(")", " ) ").lower().split()


def parse_sexpr(text: str) -> SExpr:
    """The single top-level s-expression in `text`."""
    tokens = tokenize(text)
    stack: list[list[SExpr]] = [[]]
    for token in tokens:
        if token == "(":
            stack.append([])
        elif token == ")":
            if len(stack) == 1:
                raise SeedTotError("The PDDL text has an unmatched ')': check the file's parentheses.")
            closed = stack.pop()
            stack[-1].append(closed)
        else:
            stack[-1].append(token)
    if len(stack) != 1 or len(stack[0]) != 1:
        raise SeedTotError("The PDDL text must hold exactly one balanced (define ...) expression.")
    return stack[0][0]


def _section(expr: list[SExpr], key: str) -> list[SExpr] | None:
    for item in expr:
        if isinstance(item, list) and item and item[0] == key:
            return item
    return None


def _fact(expr: SExpr) -> Fact:
    if not isinstance(expr, list) or not expr or not all(isinstance(x, str) for x in expr):
        raise SeedTotError(f"Expected a PDDL fact like (on a b), got {expr!r}: fix the PDDL text.")
    return tuple(expr)  # type: ignore[arg-type]


def _conjunction(expr: SExpr) -> list[SExpr]:
    """The members of (and f1 f2 ...), or [expr] for a single formula."""
    if isinstance(expr, list) and expr and expr[0] == "and":
        return expr[1:]
    return [expr]


def _effects(expr: SExpr) -> tuple[tuple[Fact, ...], tuple[Fact, ...]]:
    add, delete = [], []
    for item in _conjunction(expr):
        if isinstance(item, list) and item and item[0] == "not":
            delete.append(_fact(item[1]))
        else:
            add.append(_fact(item))
    return tuple(add), tuple(delete)


def parse_domain(text: str) -> Domain:
    expr = parse_sexpr(text)
    if not isinstance(expr, list) or not expr or expr[0] != "define":
        raise SeedTotError("A PDDL domain must start with (define (domain NAME) ...): check the domain file.")
    header = _section(expr, "domain")
    operators: dict[str, Operator] = {}
    for item in expr:
        if not (isinstance(item, list) and item and item[0] == ":action"):
            continue
        name = str(item[1])
        fields = {str(item[i]): item[i + 1] for i in range(2, len(item) - 1, 2)}
        parameters = fields.get(":parameters", [])
        preconditions = tuple(_fact(f) for f in _conjunction(fields.get(":precondition", ["and"])))
        add, delete = _effects(fields.get(":effect", ["and"]))
        operators[name] = Operator(name, tuple(str(p) for p in parameters), preconditions, add, delete)
    if not operators:
        raise SeedTotError("The PDDL domain defines no (:action ...): check the domain file.")
    return Domain(name=str(header[1]) if header else "", operators=operators)


def parse_problem(text: str) -> PlanningProblem:
    expr = parse_sexpr(text)
    if not isinstance(expr, list) or not expr or expr[0] != "define":
        raise SeedTotError("A PDDL problem must start with (define (problem NAME) ...): check the instance text.")
    header = _section(expr, "problem")
    objects = _section(expr, ":objects")
    init = _section(expr, ":init")
    goal = _section(expr, ":goal")
    if objects is None or init is None or goal is None or len(goal) != 2:
        raise SeedTotError("A PDDL problem needs :objects, :init and one :goal formula: check the instance text.")
    return PlanningProblem(
        name=str(header[1]) if header else "",
        objects=tuple(str(o) for o in objects[1:]),
        init=frozenset(_fact(f) for f in init[1:]),
        goal=frozenset(_fact(f) for f in _conjunction(goal[1])),
    )


def _ground(facts: tuple[Fact, ...], binding: dict[str, str]) -> list[Fact]:
    return [tuple(binding.get(term, term) for term in fact) for fact in facts]


def apply_action(domain: Domain, state: State, action: Action) -> tuple[State | None, str]:
    """(next state, "") when the action applies, else (None, the first unmet precondition)."""
    operator = domain.operators.get(action.name)
    if operator is None:
        return None, f"unknown action {action.name!r}"
    if len(action.args) != len(operator.parameters):
        return None, f"{action.name} takes {len(operator.parameters)} arguments, got {len(action.args)}"
    binding = dict(zip(operator.parameters, action.args))
    for fact in _ground(operator.preconditions, binding):
        if fact not in state:
            return None, f"{action.pddl()} needs ({' '.join(fact)})"
    # Deletes first, then adds (PDDL semantics when a fact is both deleted and added).
    next_state = (state - set(_ground(operator.delete, binding))) | set(_ground(operator.add, binding))
    return frozenset(next_state), ""


def check_plan(domain: Domain, problem: PlanningProblem, plan: list[Action]) -> PlanCheck:
    """Simulate `plan` from the initial state; report executability and goal satisfaction."""
    state = problem.init
    for index, action in enumerate(plan):
        next_state, reason = apply_action(domain, state, action)
        if next_state is None:
            return PlanCheck(False, False, index, state, f"step {index + 1}: {reason}")
        state = next_state
    missing = sorted(problem.goal - state)
    if missing:
        reason = "goal not reached: missing " + ", ".join("(" + " ".join(f) + ")" for f in missing)
        return PlanCheck(True, False, len(plan), state, reason)
    return PlanCheck(True, True, len(plan), state, "")


def parse_pddl_action(text: str) -> Action:
    """Action from "(unstack a b)" (parentheses optional)."""
    parts = text.strip().strip("()").lower().split()
    if not parts:
        raise SeedTotError(f"Expected a PDDL action like (unstack a b), got {text!r}.")
    return Action(parts[0], tuple(parts[1:]))


def applicable_actions(domain: Domain, objects: tuple[str, ...], state: State) -> list[tuple[Action, State]]:
    """Every grounded action that applies in `state`, with the state it leads to."""
    result = []
    for operator in domain.operators.values():
        for args in permutations(objects, len(operator.parameters)):
            action = Action(operator.name, args)
            next_state, _ = apply_action(domain, state, action)
            if next_state is not None:
                result.append((action, next_state))
    return result


@dataclass(frozen=True)
class SearchResult:
    plan: list[Action] | None  # an optimal plan, None when none was found within the limits
    expanded: int  # states whose legal actions were simulated
    generated: int  # successor states the simulator produced (repeated positions included)
    capped: bool  # the search stopped at `max_expanded` before the queue ran out


def breadth_first_search(domain: Domain, objects: tuple[str, ...], start: State, goal: frozenset[Fact],
                         limit: int = 12, max_expanded: int | None = None) -> SearchResult:
    """Breadth-first search over the legal actions (`applicable_actions`), each position entered once:
    the first plan reaching the goal is a shortest one. Stops without a plan when no plan has at most
    `limit` steps, or after expanding `max_expanded` states (`capped`)."""
    frontier: deque[tuple[State, tuple[Action, ...]]] = deque([(start, ())])
    seen = {start}
    expanded = generated = 0
    while frontier:
        state, plan = frontier.popleft()
        if goal <= state:
            return SearchResult(list(plan), expanded, generated, False)
        if len(plan) == limit:
            continue
        if max_expanded is not None and expanded >= max_expanded:
            return SearchResult(None, expanded, generated, True)
        expanded += 1
        for action, next_state in applicable_actions(domain, objects, state):
            generated += 1
            if next_state not in seen:
                seen.add(next_state)
                frontier.append((next_state, (*plan, action)))
    return SearchResult(None, expanded, generated, False)


def shortest_plan(domain: Domain, objects: tuple[str, ...], start: State, goal: frozenset[Fact],
                  limit: int = 12) -> list[Action] | None:
    """An optimal plan by breadth-first search (None when none has at most `limit` steps).

    Exponential in general; meant for the small instances of tests and demonstrations.
    """
    return breadth_first_search(domain, objects, start, goal, limit).plan
