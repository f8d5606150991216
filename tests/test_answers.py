"""Answer selection: majority vote over answer leaves, the CoT candidate, rejected states."""

import pytest
from scripted_executor import ScriptedExecutor
from search_helpers import FORMATTER, PROBLEM, TOKENIZER

from seed_tot.reasoning.simple_task import SimpleTask
from seed_tot.config import DecodeConfig
from seed_tot.search import BFS, BFSConfig
from seed_tot.search.answers import is_chain_of_thought, select_answer
from seed_tot.tree import ReasoningTree


class VotingTask(SimpleTask):
    votable = True


def task() -> VotingTask:
    return VotingTask(thought_template="THINK {question} {state}", value_template="RATE {state}",
                      answer_pattern=r"ANSWER: *(\S+)")


def tree_with(*leaves):
    """A root with one child per (answer, value, info) leaf."""
    tree = ReasoningTree()
    tree.add_root("")
    for answer, value, info in leaves:
        node = tree.add_child(0, thought=f"ANSWER: {answer}", state=f"ANSWER: {answer}", kind="answer")
        node.value = value
        node.info.update(info)
    return tree


def test_the_majority_wins_over_the_best_valued_leaf():
    tree = tree_with(("7", 9.0, {}), ("8", 1.0, {}), ("8", 1.0, {}))
    selection = select_answer(task(), PROBLEM, tree, chosen_id=1, vote=True)
    assert selection.answer == "8" and selection.method == "vote" and selection.votes == {"7": 1, "8": 2}
    assert selection.search_answer == "7" and selection.node_id == 2  # the tied 8s: lower id


def test_a_tie_goes_to_the_cot_answer_then_to_the_best_value():
    cot = {"cot": True}
    tree = tree_with(("7", 9.0, {}), ("8", 1.0, {}), ("8", None, cot), ("7", 2.0, {}))
    selection = select_answer(task(), PROBLEM, tree, chosen_id=1, vote=True)
    assert selection.answer == "8" and selection.cot_answer == "8" and selection.node_id == 2
    tree = tree_with(("7", 1.0, {}), ("8", 5.0, {}), ("9", None, cot), ("7", 0.5, {}), ("8", 0.1, {}))
    assert select_answer(task(), PROBLEM, tree, chosen_id=1, vote=True).answer == "8"  # 7 and 8 tie


def test_rejected_and_cut_off_answers_do_not_vote():
    tree = tree_with(("7", 9.0, {}), ("8", 0.0, {"rejected": "wrong arithmetic"}),
                     ("8", 0.0, {"finish_reason": "length"}), ("8", 1.0, {"rejected": "x"}))
    selection = select_answer(task(), PROBLEM, tree, chosen_id=2, vote=True)
    assert selection.answer == "7" and selection.votes == {"7": 1}


def test_without_vote_or_votable_answers_the_search_choice_stands():
    tree = tree_with(("7", 9.0, {}), ("8", 1.0, {}), ("8", 1.0, {}))
    assert select_answer(task(), PROBLEM, tree, chosen_id=1, vote=False).answer == "7"
    plain = SimpleTask(thought_template="", value_template="", answer_pattern=r"ANSWER: *(\S+)")
    selection = select_answer(plain, PROBLEM, tree, chosen_id=1, vote=True)
    assert selection.answer == "7" and selection.method == "search"


def test_truncated_thoughts_are_rejected_unrated_and_never_answers():
    """A thought cut off by the budget gets no evaluator request, value 0 and kind "thought"."""

    def reply(prompt, request):
        return "ANSWER: 9 and then more" if prompt.startswith("THINK") else "5"

    class CutExecutor(ScriptedExecutor):
        def run(self, requests):
            results = super().run(requests)
            for request, result in zip(requests, results):
                if request.request_id.endswith("thought0"):
                    result.finish_reason = "length"
            return results

    executor = CutExecutor(TOKENIZER, reply)
    result = BFS(task(), executor, FORMATTER, BFSConfig(n_thoughts=3, depth=1, value_samples=2)).run(PROBLEM)
    cut, *whole = result.tree.children(0)
    assert cut.kind == "thought" and cut.info["rejected"].startswith("truncated") and cut.value == 0.0
    assert cut.raw_values == [] and all(n.kind == "answer" and n.value == 5.0 for n in whole)
    assert [len(b) for b in executor.batches] == [3, 4]  # 2 samples for each of the 2 whole thoughts
    assert result.selection.votes == {"9": 2}


@pytest.mark.parametrize("cot_candidate", [True, False])
def test_the_cot_candidate_runs_in_the_first_executor_call(cot_candidate):
    class CotTask(VotingTask):
        def cot_prompt(self, problem):
            return f"SOLVE {problem.question}"

    def reply(prompt, request):
        if prompt.startswith("SOLVE"):
            return "ANSWER: 42"
        return "ANSWER: 41" if prompt.startswith("THINK") else "5"

    executor = ScriptedExecutor(TOKENIZER, reply)
    config = BFSConfig(n_thoughts=2, depth=1, value_samples=1, cot_candidate=cot_candidate, cot_samples=0)
    result = BFS(CotTask(thought_template="THINK {question}", value_template="RATE {state}",
                         answer_pattern=r"ANSWER: *(\S+)"), executor, FORMATTER, config).run(PROBLEM)
    if cot_candidate:
        assert [len(b) for b in executor.batches] == [3, 2]  # 2 thoughts + the CoT, then 2 values
        cot = [n for n in result.tree.nodes() if n.info.get("cot")]
        assert len(cot) == 1 and cot[0].parent == 0 and result.selection.cot_answer == "42"
        assert result.answer == "41"  # two leaves say 41: the majority beats the CoT
        assert [b.role for b in result.batches] == ["thought", "cot", "value"]
    else:
        assert [len(b) for b in executor.batches] == [2, 2] and result.selection.cot_answer is None


class CotTask(VotingTask):
    def cot_prompt(self, problem):
        return f"SOLVE {problem.question}"


def cot_run(sample_answers: list[str], **settings):
    """BFS of depth 1 whose two thoughts answer 41, greedy CoT 42, sampled CoT i sample_answers[i-1]."""
    cot_seeds = {}

    def reply(prompt, request):
        if prompt.startswith("SOLVE"):
            if request.config.greedy:
                return "ANSWER: 42"
            index = int(request.request_id.rsplit("cot", 1)[1])
            cot_seeds[index] = request.seed
            return f"ANSWER: {sample_answers[index - 1]}"
        return "ANSWER: 41" if prompt.startswith("THINK") else "5"

    executor = ScriptedExecutor(TOKENIZER, reply)
    config = BFSConfig(n_thoughts=2, depth=1, value_samples=1, cot_samples=len(sample_answers), **settings)
    result = BFS(CotTask(thought_template="THINK {question}", value_template="RATE {state}",
                         answer_pattern=r"ANSWER: *(\S+)"), executor, FORMATTER, config).run(PROBLEM)
    return result, executor, cot_seeds


def test_sampled_chains_of_thought_join_the_vote_in_the_cot_batch():
    result, executor, seeds = cot_run(["42", "40", "42"])
    assert [len(b) for b in executor.batches] == [2 + 1 + 3, 2]  # thoughts + greedy CoT + 3 samples, then values
    cot_batch = [r for r in executor.batches[0] if "/n0/cot" in r.request_id]
    thought = result.config.thought_decode
    assert cot_batch[0].config.greedy and all(
        (r.config.temperature, r.config.top_p) == (thought.temperature, thought.top_p) for r in cot_batch[1:])
    assert len(set(seeds.values())) == 3 and sorted(seeds) == [1, 2, 3]
    samples = sorted((n.info["cot_sample"], n.thought) for n in result.tree.nodes() if "cot_sample" in n.info)
    assert samples == [(1, "ANSWER: 42"), (2, "ANSWER: 40"), (3, "ANSWER: 42")]
    assert result.selection.votes == {"41": 2, "42": 3, "40": 1} and result.answer == "42"
    assert result.selection.cot_answer == "42"  # the greedy chain, not a sample


def test_a_tie_with_sampled_chains_goes_to_the_greedy_chain():
    result, _, _ = cot_run(["40", "40"])  # 41: 2 leaves, 40: 2 samples, 42: the greedy chain
    assert result.selection.votes == {"41": 2, "40": 2, "42": 1} and result.answer == "41"
    result, _, _ = cot_run(["42"])  # 41: 2 leaves, 42: greedy + 1 sample
    assert result.selection.votes == {"41": 2, "42": 2} and result.answer == "42"


@pytest.mark.parametrize("settings", [
    {"thought_decode": DecodeConfig(max_new_tokens=16, temperature=0.0)},  # samples would copy the greedy chain
    {"vote": False},  # nothing would count them
])
def test_no_sampled_chains_where_they_cannot_count(settings):
    result, executor, seeds = cot_run(["40", "40"], **settings)
    assert [len(b) for b in executor.batches] == [3, 2] and seeds == {}


def test_keep_limits_the_vote_to_some_nodes_and_leaves_the_tree_alone():
    cot = {"cot": True}
    tree = tree_with(("7", 9.0, {}), ("8", 1.0, {}), ("8", None, cot), ("7", 2.0, {}), ("9", None, {"cot_sample": 1}))
    whole = select_answer(task(), PROBLEM, tree, chosen_id=1, vote=True)
    assert whole.votes == {"7": 2, "8": 2, "9": 1} and whole.answer == "8"  # tie to the greedy chain
    tree_only = select_answer(task(), PROBLEM, tree, chosen_id=1, vote=True, keep=lambda n: not n.info)
    assert tree_only.votes == {"7": 2, "8": 1} and tree_only.answer == "7" and tree_only.cot_answer is None
    chains = select_answer(task(), PROBLEM, tree, chosen_id=1, vote=True, keep=is_chain_of_thought)
    assert chains.votes == {"8": 1, "9": 1} and chains.answer == "8"  # the greedy chain wins the tie
    assert len(tree) == 6


@pytest.mark.parametrize("cut", [{"finish_reason": "length"}, {"rejected": "wrong arithmetic"}])
def test_a_greedy_chain_that_does_not_vote_does_not_break_ties(cut):
    tree = tree_with(("7", 9.0, {}), ("8", 1.0, {}), ("8", None, {"cot": True, **cut}))
    selection = select_answer(task(), PROBLEM, tree, chosen_id=1, vote=True)
    assert selection.votes == {"7": 1, "8": 1} and selection.cot_answer == "8"
    assert selection.answer == "7"  # the tie goes to the best value, not to the chain that did not vote


def test_a_greedy_chain_that_votes_breaks_ties():  # the control of the test above
    tree = tree_with(("7", 9.0, {}), ("8", 1.0, {}), ("8", None, {"cot": True}), ("7", 2.0, {}))
    assert select_answer(task(), PROBLEM, tree, chosen_id=1, vote=True).answer == "8"
