"""A second round that branches from the first round's chains (--escalate-from chains): where each
branch is cut, which chains it continues, and a search that grows them as one batch."""

import pytest
from scripted_executor import ScriptedExecutor
from search_helpers import FORMATTER, TOKENIZER
from test_report import task

from seed_tot.search import SearchConfig, SelfConsistency
from seed_tot.search.answers import is_chain_of_thought
from seed_tot.search.branching import branch_prefix, branch_sources
from seed_tot.task import Problem
from seed_tot.tree import ReasoningTree

PROBLEM = Problem("p", "q?", "7")


@pytest.mark.parametrize("text, prefix", [
    ("a\nb\nc\nd", "a\nb\n"),  # 4 lines: the first 2
    ("a\n\nb\n\nc\n\nANSWER: 7", "a\n\nb\n\n"),  # blank lines after a kept line are kept with it
    ("a\nb\nc", "a\nb\n"),  # 3 lines: the first 2 (a half, rounded up)
    ("a\nb", "a\n"),  # never the whole chain: something is left to continue
    ("ANSWER: 7", ""),  # one line: the branch starts afresh
])
def test_a_branch_keeps_the_first_half_of_a_chains_lines(text, prefix):
    assert branch_prefix(text) == prefix
    assert text.startswith(prefix)


def test_branches_continue_the_best_chain_of_the_leading_answer_and_of_the_runner_up():
    tree = ReasoningTree()
    tree.add_root("")
    nodes = {}
    for name, value in (("a1", 0.2), ("a2", 0.6), ("b1", 0.9), ("c1", 0.3)):
        nodes[name] = tree.add_child(tree.root.id, thought=name, state=name, kind="answer")
        nodes[name].value = value
    candidates = [("A", nodes["a1"]), ("A", nodes["a2"]), ("B", nodes["b1"]), ("C", nodes["c1"])]
    votes = {"A": 0.8, "B": 0.9, "C": 0.3}
    assert branch_sources(candidates, votes, 4) == [nodes["b1"], nodes["a2"], nodes["b1"], nodes["a2"]]
    assert branch_sources(candidates[:2], {"A": 0.8}, 3) == [nodes["a2"]] * 3  # one answer: its best chain
    assert branch_sources([], {}, 4) == []


def chain(answer: str) -> str:
    return f"first {answer}\nsecond {answer}\nthird\nANSWER: {answer}"


def branching_reply(answers: dict[int, str]):
    """Chain i answers answers[i] over four lines; a branch (its prompt ends in a chain's first two
    lines) writes two more lines answering 7."""
    def reply(prompt, request):
        if "/branch" in request.request_id:
            return "third again\nANSWER: 7"
        return chain(answers[int(request.request_id.rsplit("cot", 1)[1])])
    return reply


def test_an_unsure_vote_grows_branches_from_its_leading_chains_in_one_batch():
    answers = {0: "8", 1: "8", 2: "9", 3: "9", 4: "6"}  # 2/5 for the leader: unsure
    executor = ScriptedExecutor(TOKENIZER, branching_reply(answers))
    config = SearchConfig(cot_samples=4, escalate_samples=4, escalate_below=0.7, escalate_from="chains")
    result = SelfConsistency(task(), executor, FORMATTER, config).run(PROBLEM)
    assert len(executor.batches) == 2 and len(executor.batches[1]) == 4
    first = {node.info.get("cot_sample", 0): node for node in result.tree.nodes() if "cot" in node.info
             or "cot_sample" in node.info}
    # the tie 8-9 goes to the answer whose best chain ranks first (no values: the lower id, the greedy chain)
    sources = [first[0].id, first[2].id, first[0].id, first[2].id]
    assert [r.request_id for r in executor.batches[1]] == [f"p/n{s}/branch{i}" for s, i in zip(sources, range(5, 9))]
    assert [p.endswith(prefix) for p, prefix in zip(executor.prompts[1], ["first 8\nsecond 8\n", "first 9\nsecond 9\n"] * 2)] \
        == [True] * 4
    assert all(r.config.temperature > 0 for r in executor.batches[1])
    prefix_tokens = len(executor.batches[1][0].prompt_ids) - len(executor.batches[0][0].prompt_ids)
    assert executor.batches[1][0].config.max_new_tokens == config.cot_decode.max_new_tokens - prefix_tokens
    branches = [node for node in result.tree.nodes() if "cot_branch" in node.info]
    assert [node.info["branched_from"] for node in branches] == sources
    assert branches[0].thought == "first 8\nsecond 8\nthird again\nANSWER: 7"
    assert all(is_chain_of_thought(node) and node.parent == result.tree.root.id for node in branches)
    assert result.answer == "7"  # the four branches answer 7: 4 of 9 votes
    assert result.metrics.new_tokens == sum(node.generation.new_tokens for node in result.tree.nodes()
                                            if is_chain_of_thought(node))


def test_a_sure_vote_grows_no_branches():
    executor = ScriptedExecutor(TOKENIZER, branching_reply({i: "8" for i in range(5)}))
    config = SearchConfig(cot_samples=4, escalate_samples=4, escalate_below=0.7, escalate_from="chains")
    assert SelfConsistency(task(), executor, FORMATTER, config).run(PROBLEM).answer == "8"
    assert len(executor.batches) == 1


@pytest.mark.parametrize("start", ["root", "chains"])
def test_a_first_round_without_answers_draws_its_second_round_afresh(start):
    """No chain answered: the most unsure vote; with nothing to branch from, the samples the default draws."""
    def reply(prompt, request):
        return "still thinking\nand thinking"  # no answer line: no vote
    executor = ScriptedExecutor(TOKENIZER, reply)
    config = SearchConfig(cot_samples=4, escalate_samples=4, escalate_below=0.7, escalate_from=start)
    SelfConsistency(task(), executor, FORMATTER, config).run(PROBLEM)
    assert [r.request_id.rsplit("/", 1)[1] for r in executor.batches[1]] == ["cot5", "cot6", "cot7", "cot8"]


def test_the_trace_and_its_viewer_show_each_branch_and_the_chain_it_continues(tmp_path):
    from seed_tot.api import to_trace
    from seed_tot.observe.html_view import trace_page_data
    from seed_tot.observe.trace import load_trace, write_trace

    executor = ScriptedExecutor(TOKENIZER, branching_reply({0: "8", 1: "8", 2: "9", 3: "9", 4: "6"}))
    config = SearchConfig(cot_samples=4, escalate_samples=4, escalate_below=0.7, escalate_from="chains")
    result = SelfConsistency(task(), executor, FORMATTER, config).run(PROBLEM)
    trace = load_trace(write_trace(tmp_path / "p.json", to_trace(result, task(), executor)))
    nodes = {n["id"]: n for n in trace_page_data(trace, lambda name: task())["nodes"]}
    branches = [n for n in nodes.values() if n["cot"] == "branch"]
    assert [n["cot_branch"] for n in branches] == [5, 6, 7, 8]
    assert all(nodes[n["branched_from"]]["cot"] in ("greedy", "sample") for n in branches)
    assert trace.config["search"]["escalate_from"] == "chains"
