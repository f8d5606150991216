"""The self-consistency search: chains of thought only, one batch, a majority vote with ties to the
greedy chain, and the very chains a tree run of the same seed adds to its own vote."""

import pytest
from scripted_executor import ScriptedExecutor
from search_helpers import FORMATTER, TOKENIZER
from test_report import task, write_run

from seed_tot.observe.comparison import comparison_report, problem_line, report_run, table
from seed_tot.errors import ConfigError
from seed_tot.reasoning.simple_task import SimpleTask
from seed_tot.search import BFS, BestOfN, BFSConfig, SearchConfig, SelfConsistency
from seed_tot.search.answers import is_chain_of_thought, select_answer
from seed_tot.task import Problem

PROBLEM = Problem("p", "q?", "7")


def chain_reply(answers: dict[int, str]):
    """Chain i (0 greedy) answers answers[i]; thoughts answer 5, every rating is 1."""
    def reply(prompt, request):
        if prompt.startswith("SOLVE"):
            return f"ANSWER: {answers[int(request.request_id.rsplit('cot', 1)[1])]}"
        return "ANSWER: 5" if prompt.startswith("THINK") else "1"
    return reply


@pytest.mark.parametrize("answers, expected", [
    ({0: "8", 1: "7", 2: "7", 3: "9", 4: "7"}, "7"),  # the majority beats the greedy chain
    ({0: "8", 1: "7", 2: "7", 3: "8", 4: "9"}, "8"),  # a 2-2 tie goes to the greedy chain
    ({0: "9", 1: "7", 2: "7", 3: "8", 4: "8"}, "7"),  # a tie the greedy chain is not in: not a coin it holds
])
def test_self_consistency_votes_over_the_chains_in_one_batch(answers, expected):
    executor = ScriptedExecutor(TOKENIZER, chain_reply(answers))
    result = SelfConsistency(task(), executor, FORMATTER, SearchConfig(cot_samples=4)).run(PROBLEM)
    assert result.answer == expected
    assert len(executor.batches) == 1 and len(executor.batches[0]) == 5  # greedy + 4 samples, no evaluator
    assert all(request.config.temperature > 0 for request in executor.batches[0][1:])
    assert executor.batches[0][0].config.temperature == 0
    chains = [node for node in result.tree.nodes() if node.id != result.tree.root.id]
    assert len(chains) == 5 and all(is_chain_of_thought(node) for node in chains)
    assert result.metrics.new_tokens == sum(node.generation.new_tokens for node in chains)


def test_self_consistency_is_the_chains_vote_of_a_tree_run_with_the_same_seed():
    """What a tree run's chains would have voted alone (the report's row) is exactly this search."""
    answers = {0: "8", 1: "7", 2: "9", 3: "7", 4: "8"}
    config = dict(cot_samples=4, value_samples=1, seed=3)
    tree_run = BFS(task(), ScriptedExecutor(TOKENIZER, chain_reply(answers)), FORMATTER, BFSConfig(**config)).run(PROBLEM)
    chains_only = select_answer(task(), PROBLEM, tree_run.tree, tree_run.chosen_path[-1], vote=True,
                                keep=is_chain_of_thought)
    alone = SelfConsistency(task(), ScriptedExecutor(TOKENIZER, chain_reply(answers)), FORMATTER,
                            SearchConfig(**config)).run(PROBLEM)
    assert tree_run.answer == "5" != alone.answer  # the tree's leaves outvote the chains there
    assert alone.answer == chains_only.answer == "8"
    seeds = lambda result: sorted(node.seeds["cot"] for node in result.tree.nodes() if is_chain_of_thought(node))
    assert seeds(alone) == seeds(tree_run)


def test_self_consistency_refuses_what_it_cannot_vote():
    with pytest.raises(ConfigError, match="--no-cot and --no-vote"):
        SelfConsistency(task(), None, FORMATTER, SearchConfig(vote=False))
    with pytest.raises(ConfigError, match="--no-cot and --no-vote"):
        SelfConsistency(task(), None, FORMATTER, SearchConfig(cot_candidate=False))
    no_chains = SimpleTask(thought_template="THINK {question}", value_template="RATE {state}", name="plain")
    with pytest.raises(ConfigError, match="self-consistency needs a task with a chain-of-thought prompt"):
        SelfConsistency(no_chains, None, FORMATTER, SearchConfig())
    with pytest.raises(ConfigError, match="best-of-n needs a task with a chain-of-thought prompt"):
        BestOfN(no_chains, None, FORMATTER, SearchConfig())


def test_the_report_names_a_self_consistency_run_and_scores_its_vote(tmp_path):
    problems = [Problem(id=f"mine-{i}", question="What is 3 + 4?", gold=gold) for i, gold in ((1, "7"), (2, "8"))]
    write_run(tmp_path / "sc", problems,
              search=lambda executor: SelfConsistency(task(), executor, FORMATTER, SearchConfig(cot_samples=2)))
    text, points = comparison_report([tmp_path / "sc"], lambda name: task())
    final = next(p for p in points if p.label.endswith(": final"))
    assert final.label.startswith("run sc (self-consistency: greedy + 2 sampled chains,")
    assert final.per_problem == [1.0, 0.0]  # every chain answers 7
    assert "n=" not in final.label and "k=" not in final.label
    assert "its chains' vote alone" not in text  # its final answer is that vote


def test_the_run_table_of_a_self_consistency_run_has_no_tree_columns(tmp_path):
    problems = [Problem(id=f"mine-{i}", question="What is 3 + 4?", gold=gold) for i, gold in ((1, "7"), (2, "8"))]
    write_run(tmp_path, problems,
              search=lambda executor: SelfConsistency(task(), executor, FORMATTER, SearchConfig(cot_samples=2)))
    reports = report_run(tmp_path, lambda name: task())
    header, _, row = table(reports, "-").splitlines()
    assert header.startswith("| problems | final (the chains' vote) | greedy CoT alone | tokens / problem (chains")
    assert row.startswith("| 2 | 1/2 (50%) | 1/2 (50%) |") and row.count("|") == header.count("|")
    assert problem_line(reports[0]) == "mine-1: gold 7 | final 7, cot 7"


def test_the_report_sets_a_tree_run_against_its_own_chains_vote(tmp_path):
    """The tree's leaves answer 5, its chains 7 (gold): the leaves win the run's vote and lose it."""
    def reply(prompt, request):
        return "ANSWER: 7" if prompt.startswith("SOLVE") else ("ANSWER: 5" if prompt.startswith("THINK") else "9")

    def tree_search(executor):
        return BFS(task(), ScriptedExecutor(TOKENIZER, reply), FORMATTER,
                   BFSConfig(n_thoughts=3, depth=1, value_samples=1, cot_samples=1))

    write_run(tmp_path / "tree", [Problem(id="mine-1", question="What is 3 + 4?", gold="7")], search=tree_search)
    text, _ = comparison_report([tmp_path / "tree"], lambda name: task())
    row = next(line for line in text.splitlines() if "its chains' vote alone" in line and line.startswith("|"))
    chain_tokens = 2 * len(TOKENIZER.encode("ANSWER: 7", add_special_tokens=False))
    assert row.endswith(f"| 1/1 | 100.0% | {chain_tokens:,} |")
    assert "final vs its chains' vote alone" in text and "-100.0 points" in text


@pytest.mark.parametrize("answers, rounds, expected", [
    ({0: "8", 1: "7", 2: "7", 3: "7", 4: "7"}, 1, "7"),  # 4 of 5 votes: sure enough, no second round
    ({0: "8", 1: "8", 2: "7", 3: "7", 4: "9", 5: "7", 6: "7", 7: "9", 8: "7"}, 2, "7"),  # 2/5: 4 more drawn
])
def test_an_unsure_vote_draws_a_second_round_of_chains(answers, rounds, expected):
    executor = ScriptedExecutor(TOKENIZER, chain_reply(answers))
    config = SearchConfig(cot_samples=4, escalate_samples=4, escalate_below=0.7)
    result = SelfConsistency(task(), executor, FORMATTER, config).run(PROBLEM)
    assert result.answer == expected and len(executor.batches) == rounds
    if rounds == 2:  # the second round continues the sample indices, with the seeds a single round would use
        assert [r.request_id.rsplit("cot", 1)[1] for r in executor.batches[1]] == ["5", "6", "7", "8"]
        assert all(request.config.temperature > 0 for request in executor.batches[1])
        one_round = ScriptedExecutor(TOKENIZER, chain_reply(answers))
        SelfConsistency(task(), one_round, FORMATTER, SearchConfig(cot_samples=8)).run(PROBLEM)
        assert [r.seed for r in executor.batches[0] + executor.batches[1]] == \
            [r.seed for r in one_round.batches[0]]
    chains = [node for node in result.tree.nodes() if is_chain_of_thought(node)]
    assert len(chains) == 1 + 4 * rounds
    assert result.metrics.new_tokens == sum(node.generation.new_tokens for node in chains)


def test_no_second_round_without_sampled_chains():
    answers = {0: "8", 1: "7", 2: "9"}
    greedy_thoughts = SearchConfig(cot_samples=2, escalate_samples=4, escalate_below=1.0,
                                   thought_decode=SearchConfig().thought_decode.model_copy(update={"temperature": 0.0}))
    executor = ScriptedExecutor(TOKENIZER, chain_reply(answers))
    SelfConsistency(task(), executor, FORMATTER, greedy_thoughts).run(PROBLEM)
    assert len(executor.batches) == 1 and len(executor.batches[0]) == 1  # the greedy chain alone


def test_the_report_names_the_second_round(tmp_path):
    problems = [Problem(id="mine-1", question="What is 3 + 4?", gold="7")]
    config = SearchConfig(cot_samples=2, escalate_samples=3, escalate_below=0.9)
    write_run(tmp_path / "sc", problems, search=lambda executor: SelfConsistency(task(), executor, FORMATTER, config))
    _, points = comparison_report([tmp_path / "sc"], lambda name: task())
    final = next(p for p in points if p.label.endswith(": final"))
    assert "greedy + 2 sampled chains, 3 more where the vote's winner holds < 0.9" in final.label
