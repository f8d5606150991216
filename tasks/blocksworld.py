"""Blocksworld (PlanBench step-6 set): plan block moves one action per thought, checked by simulation."""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

from seed_tot.errors import SeedTotError
from seed_tot_tasks.base import DATA_DIR, Problem, Task, load_template, row_id
from seed_tot_tasks.blocksworld_text import action_text, facts_text, parse_action, statement_text
from seed_tot_tasks.jsonl import read_jsonl
from seed_tot_tasks.pddl import (
    Action,
    Domain,
    PlanCheck,
    PlanningProblem,
    applicable_actions,
    check_plan,
    parse_domain,
    parse_problem,
)

DEFAULT_PATH = DATA_DIR / "blocksworld" / "planbench_step6.jsonl"
DEFAULT_DOMAIN = DATA_DIR / "blocksworld" / "generated_domain.pddl"
NO_ACTIONS = "(no actions yet)"

_GOOD = re.compile(r"\b(not\s+(?:a\s+)?)?(good|bad)\b", re.IGNORECASE)


@lru_cache(maxsize=8)
def load_domain(path: str = str(DEFAULT_DOMAIN)) -> Domain:
    return parse_domain(Path(path).read_text(encoding="utf-8"))


@lru_cache(maxsize=1024)
def planning_problem(instance_pddl: str) -> PlanningProblem:
    return parse_problem(instance_pddl)


def plan_lines(state: str) -> list[str]:
    return [line.strip() for line in state.splitlines() if line.strip()]


def read_plan(lines: list[str]) -> list[Action] | None:
    """The actions of plan lines, or None when a line names no readable action."""
    actions = [parse_action(line) for line in lines]
    return None if any(a is None for a in actions) else actions  # type: ignore[return-value]


def parse_good_bad(text: str) -> float | None:
    """1.0 for "good", 0.0 for "bad" (the first verdict in the reply); "not good" is bad; else None."""
    match = _GOOD.search(text)
    if match is None:
        return None
    negated, verdict = match.group(1), match.group(2).lower()
    if negated:
        return 0.0 if verdict == "good" else None  # "not bad" is too vague to rank
    return 1.0 if verdict == "good" else 0.0


class BlocksworldTask(Task):
    """Blocksworld as in SEED (Appendix D), depth 7 (the step-6 set has 6-step optimal plans).

    A thought is the next action, generated after demonstrations (prompts/blocksworld/) from
    the statement, the actions so far and the simulated current state. The state is the plan
    so far, one action per line in PlanBench wording. A state is terminal when the simulated
    plan reaches the goal or when its last action is unreadable or breaks a precondition
    (such a plan scores 0, and the rule check rejects it before any evaluator call). The
    evaluator judges the last action "good" (value 1.0) or "bad" (0.0); an unreadable verdict
    gets `fallback_value` = 0.0, the same as "bad". The thought prompt lists the actions legal in the
    current state (simulated from the domain). A thought ends at its first line break (one
    action per thought). With thought mode "choose" the target ranks those legal actions, less
    the ones that return to a position already passed, by the probability of writing each after
    the thought prompt (seed_tot/reasoning/move_chooser.py). The CoT candidate writes the whole plan at once.
    """

    name = "blocksworld"
    default_data_path = DEFAULT_PATH  # the bundled data, read when no path is given
    default_depth = 7
    fallback_value = 0.0
    thought_stop = ("\n",)
    verdict_values = {"good": 1.0, "bad": 0.0}  # value mode "logits": the reply's first word
    verdict_prefix = ""
    votable = True  # answers are plans in PlanBench wording: equal plans can be counted
    # the CLI's search when none is given: on instances 41-60, by rules written before they ran, the
    # BFS tree of chosen moves beat the vote of the chains it ran (7/20 against 1/20), and MCTS over
    # the same moves solved more than the BFS tree (14/20 against 7/20, +35 points, 95% paired
    # bootstrap [+15, +55] against the BFS tree in either dtype; docs/quality.md)
    default_search = "mcts"
    # the search of a method that cannot score (no chosen moves, no logit evaluator): on instances 41-60
    # MCTS with sampled thoughts and the sampled evaluator answered 2/20 against 1/20 for the vote of
    # its chains (+5 points, [0, +15], not above zero) at 4.5x their tokens, so the chains vote
    default_search_unscored = "self-consistency"
    # the tree's own settings when the command names none (and the method can score): on instances 21-40
    # the tree of chosen legal moves with the logit evaluator solved 4/20 by itself against 1/20 with
    # sampled thoughts, generating no tokens (docs/quality.md)
    default_thought_mode = "choose"
    default_value_mode = "logits"

    def __init__(self, domain_path: str | Path | None = None) -> None:
        self.domain = load_domain(str(domain_path or DEFAULT_DOMAIN))

    def load(self, path: str | Path | None = None) -> list[Problem]:
        source = Path(path) if path is not None else DEFAULT_PATH
        problems = []
        for line_no, row in read_jsonl(source, ("instance_pddl",)):
            try:
                instance = planning_problem(str(row["instance_pddl"]))
            except SeedTotError as error:
                raise SeedTotError(f"{source}, line {line_no}: {error}") from None
            gold = row.get("gold_plan", [])
            if not isinstance(gold, list) or not all(isinstance(a, str) for a in gold):
                raise SeedTotError(f"{source}, line {line_no}: 'gold_plan' must be a list of PDDL actions.")
            problems.append(
                Problem(
                    id=row_id(row, "blocksworld", source, DEFAULT_PATH, line_no),
                    question=statement_text(instance.init, instance.goal),
                    gold=gold,
                    meta={"instance_pddl": row["instance_pddl"], "n_steps": row.get("n_steps"), "line": line_no},
                )
            )
        return problems

    def check(self, problem: Problem, actions: list[Action]) -> PlanCheck:
        return check_plan(self.domain, planning_problem(problem.meta["instance_pddl"]), actions)

    def _plan_context(self, problem: Problem, lines: list[str]) -> dict[str, str]:
        """Template fields for a plan prefix: the statement, the plan text and the state it reaches."""
        actions = read_plan(lines) or []
        result = self.check(problem, actions)
        objects = planning_problem(problem.meta["instance_pddl"]).objects
        possible = applicable_actions(self.domain, objects, result.final_state)
        return {
            "intro": load_template(self.name, "intro"),
            "statement": problem.question,
            "plan": "\n".join(lines) or NO_ACTIONS,
            "current_state": facts_text(result.final_state),
            "possible_actions": "\n".join(action_text(action) for action, _ in possible),
        }

    def thought_prompt(self, problem: Problem, state: str, step: int, depth: int) -> str:
        return load_template(self.name, "thought").format(
            demonstrations=load_template(self.name, "demonstrations"),
            **self._plan_context(problem, plan_lines(state)),
        )

    def next_moves(self, problem: Problem, state: str, step: int) -> list[str]:
        """The actions legal after the plan that do not return to a position the plan already passed
        through (thought mode "choose"); none after an unreadable or illegal plan, or at the goal."""
        actions = read_plan(plan_lines(state))
        if actions is None:
            return []
        result = self.check(problem, actions)
        if not result.executable or result.reaches_goal:
            return []
        passed = {self.check(problem, actions[:count]).final_state for count in range(len(actions) + 1)}
        objects = planning_problem(problem.meta["instance_pddl"]).objects
        return [action_text(action) for action, after in applicable_actions(self.domain, objects, result.final_state)
                if after not in passed]

    def value_prompt(self, problem: Problem, state: str, step: int) -> str:
        lines = plan_lines(state)
        return load_template(self.name, "value").format(
            value_demonstrations=load_template(self.name, "value_demonstrations"),
            action=lines[-1] if lines else NO_ACTIONS,
            **self._plan_context(problem, lines[:-1]),
        )

    def parse_value(self, text: str) -> float | None:
        return parse_good_bad(text)

    def check_step(self, problem: Problem, state: str) -> str | None:
        """Why the plan's newest action is certainly wrong (unreadable, or illegal here), or None."""
        actions = read_plan(plan_lines(state))
        if actions is None:
            return "unreadable action"
        if not self.check(problem, actions).executable:
            return "the action breaks a precondition"
        return None

    def cot_prompt(self, problem: Problem) -> str:
        """The whole plan in one generation (the CoT candidate of the vote)."""
        return load_template(self.name, "cot").format(
            intro=load_template(self.name, "intro"),
            demonstrations=load_template(self.name, "demonstrations"),
            statement=problem.question,
        )

    def cot_state(self, text: str) -> str:
        """A generated whole plan as a state: its action lines up to [PLAN END], in PlanBench wording."""
        lines = []
        for line in text.split("[PLAN END]")[0].splitlines():
            line = line.strip()
            if not line or line.startswith("["):
                continue
            action = parse_action(line)
            lines.append(action_text(action) if action is not None else line)
        return "\n".join(lines)

    def extend_state(self, state: str, thought: str, step: int) -> str:
        """Append the thought's first action in PlanBench wording (its first line when unreadable)."""
        action = parse_action(thought)
        if action is not None:
            line = action_text(action)
        else:
            line = next((ln.strip() for ln in thought.splitlines() if ln.strip()), "(empty thought)")
        return "\n".join([*plan_lines(state), line])

    def state_key(self, problem: Problem, state: str) -> frozenset | None:
        """The simulated world state the plan reaches (None for an unreadable or illegal plan):
        plans that reach one arrangement of blocks are the same position for the search."""
        actions = read_plan(plan_lines(state))
        if actions is None:
            return None
        result = self.check(problem, actions)
        return result.final_state if result.executable else None

    def reaches_goal(self, problem: Problem, state: str) -> bool:
        """True when the simulator shows the plan reaching the goal."""
        actions = read_plan(plan_lines(state))
        return actions is not None and self.check(problem, actions).valid

    def is_terminal(self, problem: Problem, state: str, step: int, depth: int) -> bool:
        actions = read_plan(plan_lines(state))
        if actions is None:
            return True
        result = self.check(problem, actions)
        return result.reaches_goal or not result.executable

    def extract_answer(self, problem: Problem, state: str) -> str | None:
        lines = plan_lines(state)
        return "\n".join(lines) if lines else None

    def score(self, problem: Problem, answer: str | None) -> float:
        actions = read_plan(plan_lines(answer or ""))
        if actions is None:
            return 0.0
        return 1.0 if self.check(problem, actions).valid else 0.0
