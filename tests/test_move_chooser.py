"""Thought mode "choose" (seed_tot/reasoning/move_chooser.py): the target ranks the moves a task
lists by the probability of writing each (decoding held to the listed moves), and the n most
likely become the children."""

from __future__ import annotations

import math

import pytest
from scripted_executor import ScoringByModel
from search_helpers import FORMATTER, PROBLEM, TOKENIZER, make_task

from seed_tot.errors import ConfigError
from seed_tot.reasoning.move_chooser import branch_points, move_probabilities, move_tokens
from seed_tot.reasoning.prompting import PromptFormatter
from seed_tot.requests import GenerationResult, GenerationStats
from seed_tot.scheduling.factory import make_executor
from seed_tot.search import BFS, MCTS, BFSConfig, MCTSConfig
from seed_tot_tasks.blocksworld import BlocksworldTask, plan_lines, read_plan
from seed_tot_tasks.blocksworld_text import action_text
from seed_tot_tasks.pddl import parse_pddl_action

MOVES = ["go north", "go south", "go east", "go west"]


def move_task(moves=lambda state: MOVES, depth=1):
    task = make_task(depth=depth)
    task.next_moves = lambda problem, state, step: moves(state)
    return task


def test_a_moves_probability_is_the_product_over_the_points_where_moves_part():
    tokens = [(1, 2, 3), (1, 2, 4), (5,)]
    branches = branch_points(tokens)
    assert branches == {(): (1, 5), (1, 2): (3, 4)}
    logprobs = {(): [math.log(0.6), math.log(0.2)], (1, 2): [math.log(0.1), math.log(0.3)]}
    # renormalised at each point: 0.75 / 0.25 at the root, 0.25 / 0.75 after (1, 2)
    assert move_probabilities(tokens, branches, logprobs) == pytest.approx([0.75 * 0.25, 0.75 * 0.75, 0.25])


def test_moves_that_start_one_another_cannot_be_told_apart():
    with pytest.raises(ConfigError, match="one the start of the other.*--thought-mode sample"):
        move_tokens(FORMATTER, "Move:\n", ["go", "go on"])


def hand_probability(target, context_ids, moves, move):
    """P(move) under decoding held to `moves`: at each byte where moves part, the model's softmax
    over the bytes that continue a move there, no cache, no batching."""
    import torch

    p, written = 1.0, ""
    for char in move:
        options = sorted({m[len(written)] for m in moves if m.startswith(written) and len(m) > len(written)})
        if len(options) > 1:
            ids = [TOKENIZER.encode(c)[0] for c in options]
            with torch.no_grad():
                logits = target.model(torch.tensor([context_ids + TOKENIZER.encode(written)])).logits[0, -1].float()
            p *= torch.softmax(logits[ids], -1)[options.index(char)].item()
        written += char
    return p


def test_the_children_are_the_models_most_likely_moves(tiny_pair):
    _, target = tiny_pair
    moves = ["go north", "go nowhere", "go south", "stay"]
    task = move_task(moves=lambda state: moves)
    executor = ScoringByModel(make_executor("batched", target), reply=lambda request: "7")  # every value "7"
    config = BFSConfig(depth=1, n_thoughts=2, value_samples=1, thought_mode="choose", cot_candidate=False)
    result = BFS(task, executor, PromptFormatter(target.tokenizer), config).run(PROBLEM)

    context_ids = FORMATTER.encode(task.thought_prompt(PROBLEM, "", 0, 1))
    expected = [hand_probability(target, context_ids, moves, move) for move in moves]
    assert sum(expected) == pytest.approx(1.0)
    best = sorted(range(len(moves)), key=lambda i: (-expected[i], i))[:2]
    children = result.tree.children(0)
    assert [c.thought for c in children] == [moves[i] for i in best]
    assert [c.info["move_probability"] for c in children] == pytest.approx([expected[i] for i in best], rel=1e-3)
    # the moves part at the start ("g"/"s"), after "go " ("n"/"s") and after "go no" ("r"/"w"): three forwards
    assert len(executor.batches[0]) == 3 and all(r.score_tokens for r in executor.batches[0])
    assert sum(c.generation.new_tokens for c in children) == 0


def test_a_state_with_no_move_is_a_dead_end_for_bfs_and_mcts():
    task = move_task(moves=lambda state: [] if state else MOVES[:2], depth=3)
    executor = ScriptedScoring()
    config = BFSConfig(n_thoughts=2, value_samples=1, thought_mode="choose", cot_candidate=False)
    result = BFS(task, executor, FORMATTER, config).run(PROBLEM)
    first = result.tree.children(0)
    assert [c.thought for c in first] == MOVES[:2]
    assert len(result.chosen_path) == 2 and result.tree.node(result.chosen_path[1]).info.get("dead_end")
    assert len(executor.batches) == 2  # moves of the root, its children rated; the dead end sends nothing
    mcts = MCTS(task, ScriptedScoring(), FORMATTER,
                MCTSConfig(n_thoughts=2, iterations=5, value_samples=1, thought_mode="choose", cot_candidate=False))
    tree = mcts.run(PROBLEM).tree
    assert len(list(tree.nodes())) == 3 and all(n.info.get("dead_end") for n in tree.children(0))


@pytest.mark.parametrize("backtrack", [True, False])
def test_bfs_goes_back_to_the_best_unexpanded_state_when_its_kept_state_is_a_dead_end(backtrack):
    follow = {"": MOVES[:2], "go north": [], "go south": ["go east"], "go south\ngo east": ["go west"]}
    task = move_task(moves=lambda state: follow.get(state.strip(), []), depth=3)
    executor = ScriptedScoring()
    config = BFSConfig(n_thoughts=2, value_samples=1, thought_mode="choose", cot_candidate=False, backtrack=backtrack)
    result = BFS(task, executor, FORMATTER, config).run(PROBLEM)
    north, south = result.tree.children(0)
    assert north.info["selected"] and north.info["dead_end"]  # "n" is scored above "s" and the values tie: it dies
    thought_rounds = [b for b in executor.batches if b[0].score_tokens is not None]
    if backtrack:
        assert south.info["backtracked"] and max(n.depth for n in result.tree.nodes()) == 2
        assert result.tree.node(result.chosen_path[-1]).state.strip() == "go south\ngo east"
        east = result.tree.node(result.chosen_path[-1])
        assert east.info["bfs_step"] == 2 and east.info["move_probability"] == 1.0  # the dead end took step 1 of 3
        assert len(thought_rounds) == 1  # only the root's two moves part; a lone move needs no forward
    else:
        assert "backtracked" not in south.info and not result.tree.children(south.id)
        assert result.chosen_path == [0, north.id]


def test_a_task_that_lists_no_moves_is_refused_before_any_model_runs():
    with pytest.raises(ConfigError, match="cannot list its moves.*--thought-mode sample"):
        BFS(make_task(), None, FORMATTER, BFSConfig(thought_mode="choose"))


def test_an_executor_that_generates_instead_of_scoring_is_a_clear_error():
    from scripted_executor import ScriptedExecutor

    executor = ScriptedExecutor(TOKENIZER, lambda prompt, request: "7")
    with pytest.raises(ConfigError, match="no move log-probabilities"):
        BFS(move_task(), executor, FORMATTER, BFSConfig(thought_mode="choose", value_samples=1)).run(PROBLEM)


# -- Blocksworld ------------------------------------------------------------------------------

BLOCKS = BlocksworldTask()
INSTANCE = BLOCKS.load()[0]
GOLD = [action_text(parse_pddl_action(a)) for a in INSTANCE.gold]


def test_blocksworld_lists_the_legal_moves_that_do_not_go_back():
    first = BLOCKS.next_moves(INSTANCE, "", 0)
    assert GOLD[0] in first and all(BLOCKS.check_step(INSTANCE, move) is None for move in first)
    after = BLOCKS.next_moves(INSTANCE, GOLD[0], 1)
    undo = BLOCKS.state_key(INSTANCE, "")
    assert all(BLOCKS.state_key(INSTANCE, "\n".join([GOLD[0], move])) != undo for move in after)
    assert GOLD[1] in after
    assert BLOCKS.next_moves(INSTANCE, "\n".join(GOLD), len(GOLD)) == []  # at the goal
    assert BLOCKS.next_moves(INSTANCE, "fly the red block to the moon", 1) == []  # unreadable plan


class ScriptedScoring:
    """Scoring requests favour the token that continues the next gold action (else the first
    token listed); evaluator replies say "good". Records every batch."""

    name = "scripted-scoring"

    def __init__(self, gold=()):
        self.gold = list(gold)
        self.batches = []

    def run(self, requests):
        self.batches.append(list(requests))
        return [self._score(r) if r.score_tokens is not None else GenerationResult(r.request_id, [1], "good", "eos")
                for r in requests]

    def _score(self, request):
        prompt = TOKENIZER.decode(request.prompt_ids)
        wanted, written = None, ""
        if "The current action is:" in prompt:
            written = prompt.rsplit("The current action is:", 1)[1].lstrip("\n")
            plan = plan_lines(prompt.rsplit("[PLAN]\n", 1)[-1].split("\n\n", 1)[0].replace("(no actions yet)", ""))
            on_gold = plan == self.gold[: len(plan)] and len(plan) < len(self.gold)
            wanted = self.gold[len(plan)] if on_gold else None
        texts = [written + TOKENIZER.decode([token]) for token in request.score_tokens]
        logprobs = [0.0 if wanted and wanted.startswith(text) else -1.0 - i for i, text in enumerate(texts)]
        return GenerationResult(request.request_id, [], "", "stop", GenerationStats(target_forwards=1),
                                candidate_logprobs=logprobs)

    def close(self):
        pass


def test_blocksworld_bfs_with_chosen_moves_never_makes_an_illegal_or_repeated_child():
    executor = ScriptedScoring(GOLD)
    config = BFSConfig(n_thoughts=3, value_samples=1, thought_mode="choose", cot_candidate=False)
    result = BFS(BLOCKS, executor, PromptFormatter(TOKENIZER), config).run(INSTANCE)
    assert result.score == 1.0 and result.answer == "\n".join(GOLD)
    children = [n for n in result.tree.nodes() if n.depth > 0]
    assert all(read_plan(plan_lines(n.state)) is not None and BLOCKS.check_step(INSTANCE, n.state) is None
               for n in children)
    for parent in {n.parent for n in children}:
        siblings = [n.thought for n in result.tree.children(parent)]
        assert len(set(siblings)) == len(siblings)
    assert not any("on its path" in n.info.get("rejected", "") for n in children)  # never listed
    scoring = [r for batch in executor.batches for r in batch if r.score_tokens is not None]
    assert scoring and all(len(r.score_tokens) > 1 for r in scoring)  # one request per point where moves part


def test_the_move_quality_script_marks_the_gold_plan_optimal():
    import importlib.util
    from pathlib import Path
    from types import SimpleNamespace

    path = Path(__file__).resolve().parents[1] / "scripts" / "blocksworld_move_quality.py"
    spec = importlib.util.spec_from_file_location("blocksworld_move_quality", path)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)

    config = BFSConfig(n_thoughts=3, value_samples=1, thought_mode="choose", cot_candidate=False)
    result = BFS(BLOCKS, ScriptedScoring(GOLD), PromptFormatter(TOKENIZER), config).run(INSTANCE)
    moves = script.rated_moves(SimpleNamespace(nodes=list(result.tree.nodes())), INSTANCE)
    rated = [n for n in result.tree.nodes() if n.depth > 0 and "rejected" not in n.info]
    assert len(moves) == len(rated)
    on_path = {n.id for n in rated if n.id in result.chosen_path}
    assert on_path and all(m["optimal"] for n, m in zip(rated, moves) if n.id in on_path)
    assert not all(m["optimal"] for m in moves)  # a sibling that does not shorten the plan is told apart
