"""The compute-matched comparison: exact self-consistency over subsets, McNemar and the paired
bootstrap, one vote per path, best-of-N reranking, and `seed-tot report` on a pool plus a tree run."""

import json

import pytest
from scipy.stats import binomtest
from scripted_executor import ScriptedExecutor
from search_helpers import FORMATTER, TOKENIZER
from test_report import task, write_run

from seed_tot.observe.comparison import comparison_report, draw, run_label
from seed_tot.observe.paired_stats import expected_vote_accuracy, majority_credit, mcnemar_exact, paired_bootstrap
from seed_tot.search import BFS, BestOfN, BFSConfig, SearchConfig
from seed_tot.search.answers import select_answer
from seed_tot.task import Problem
from seed_tot.tree import ReasoningTree


def test_self_consistency_is_the_exact_mean_over_subsets_with_ties_split():
    pool, correct = ["a", "a", "b", None], {"a"}
    assert majority_credit(["a", "b"], correct) == 0.5  # a tie counted as a win would say 1
    assert majority_credit([None, None], correct) == 0.0
    # K=2: (a,a) 1, (a,b) 1/2 twice, (a,None) 1 twice, (b,None) 0 -> 4/6
    assert expected_vote_accuracy(pool, correct, 2) == pytest.approx(4 / 6)
    assert expected_vote_accuracy(pool, correct, 1) == pytest.approx(2 / 4)
    assert expected_vote_accuracy(pool, correct, 4) == 1.0
    with pytest.raises(ValueError):
        expected_vote_accuracy(pool, correct, 5)


@pytest.mark.parametrize("first_only, second_only", [(5, 0), (7, 2), (3, 3), (1, 0)])
def test_mcnemar_exact_matches_the_two_sided_binomial_test(first_only, second_only):
    first = [True] * first_only + [False] * second_only + [True, False]
    second = [False] * first_only + [True] * second_only + [True, False]
    a, b, p = mcnemar_exact(first, second)
    assert (a, b) == (first_only, second_only)
    assert p == pytest.approx(binomtest(first_only, first_only + second_only, 0.5).pvalue)


def test_paired_bootstrap_brackets_the_mean_and_is_seeded():
    differences = [1.0] * 8 + [0.0] * 12
    low, high = paired_bootstrap(differences, resamples=2000)
    assert low < 0.4 < high and low > 0.0
    assert paired_bootstrap(differences, resamples=2000) == (low, high)
    assert paired_bootstrap([0.0, 0.0, 0.0], resamples=200) == (0.0, 0.0)


def leaves_and_chains() -> tuple[ReasoningTree, int]:
    """Three sibling leaves say 5 (one parent state); two sampled chains say 7."""
    tree = ReasoningTree()
    root = tree.add_root("")
    parent = tree.add_child(root.id, thought="step", state="step", kind="thought")
    for _ in range(3):
        leaf = tree.add_child(parent.id, thought="ANSWER: 5", state="ANSWER: 5", kind="answer")
        leaf.value = 1.0
    for index in (1, 2):
        chain = tree.add_child(root.id, thought="ANSWER: 7", state="ANSWER: 7", kind="answer")
        chain.info["cot_sample"] = index
    return tree, leaf.id


def test_one_vote_per_path_counts_siblings_once():
    tree, chosen = leaves_and_chains()
    problem = Problem(id="p", question="q", gold="7")
    assert select_answer(task(), problem, tree, chosen, vote=True, weight="leaf").answer == "5"  # 3 against 2
    by_path = select_answer(task(), problem, tree, chosen, vote=True, weight="path")
    assert by_path.answer == "7" and by_path.votes == {"5": 1, "7": 2}


@pytest.mark.parametrize("best", ["1", "2"])
def test_best_of_n_answers_with_the_best_rated_complete_chain(best):
    def reply(prompt, request):
        if prompt.startswith("SOLVE"):
            return f"ANSWER: {request.request_id.rsplit('chain', 1)[1]}"
        return "9" if f"ANSWER: {best}" in prompt else "1"

    config = SearchConfig(n_thoughts=3, value_samples=1, vote=False, cot_candidate=False)
    result = BestOfN(task(), ScriptedExecutor(TOKENIZER, reply), FORMATTER, config).run(Problem("p", "q?", "1"))
    chains = [n for n in result.tree.nodes() if n.info.get("chain") is not None]
    assert len(chains) == 3 and all(n.value is not None for n in chains)
    assert result.answer == best  # the reranking, not the first chain
    assert result.metrics.new_tokens == sum(n.generation.new_tokens + n.evaluation.new_tokens for n in chains)


def write_pool(folder, rows):
    folder.mkdir(parents=True, exist_ok=True)
    settings = {"task": "report-test", "samples": 4, "dtype": "float16"}
    with (folder / "cot_samples.jsonl").open("w") as handle:
        for problem_id, gold, answers, counts, greedy in rows:
            handle.write(json.dumps({
                "problem_id": problem_id, "question": "What is 3 + 4?", "gold": gold,
                "samples": [f"ANSWER: {a}" for a in answers], "finish_reasons": ["eos"] * len(answers),
                "sample_token_counts": counts, "sample_indices": list(range(1, len(answers) + 1)),
                "greedy": f"ANSWER: {greedy}", "greedy_finish_reason": "eos", "greedy_token_count": 5,
                "settings": settings}) + "\n")


def test_report_pairs_a_pool_with_a_tree_run_by_problem_id(tmp_path):
    write_run(tmp_path / "tree", [Problem(id=f"mine-{i}", question="What is 3 + 4?", gold="7") for i in (1, 2)])
    write_pool(tmp_path / "pool", [
        ("mine-1", "7", ["7", "7", "8", "8"], [10, 10, 10, 10], "7"),
        ("mine-2", "7", ["8", "8", "8", "7"], [20, 20, 20, 20], "8"),
        ("mine-3", "7", ["7", "7", "7", "7"], [30, 30, 30, 30], "7"),  # no tree: not paired
    ])
    text, points = comparison_report([tmp_path / "pool", tmp_path / "tree"], lambda name: task())
    assert "2 problems (mine-1 ... mine-2)" in text and "pool, sampled in float16;" in text
    by_label = {p.label.split(" (")[0]: p for p in points}
    assert by_label["greedy chain of thought"].per_problem == [1.0, 0.0]
    k1 = by_label["self-consistency K=1"]
    assert k1.per_problem == pytest.approx([0.5, 0.25]) and k1.tokens == 15
    # K=4: a 2-2 tie (1/2) and a 3-1 loss
    assert by_label["self-consistency K=4"].per_problem == pytest.approx([0.5, 0.0])
    tree = next(p for p in points if p.label.endswith(": final"))
    assert tree.per_problem == [1.0, 1.0] and "k=1 samples" in tree.label
    assert "McNemar exact" in text and "paired bootstrap" in text and "prompt (prefill) tokens are not counted" in text


def test_a_logit_evaluator_run_is_labelled_without_a_sample_count(tmp_path):
    write_run(tmp_path / "tree", [Problem(id="mine-1", question="What is 3 + 4?", gold="7")])
    trace_path = tmp_path / "tree" / "traces" / "mine-1.json"
    trace = json.loads(trace_path.read_text())
    trace["config"]["search"]["value_mode"] = "logits"
    trace_path.write_text(json.dumps(trace))
    label = run_label(tmp_path / "tree")
    assert "logits" in label and "k=" not in label and "known states" not in label
    trace["config"]["search"]["known_states"] = False
    trace_path.write_text(json.dumps(trace))
    assert "known states off" in run_label(tmp_path / "tree")  # the before arm of a before/after


def test_a_run_resumed_in_another_dtype_says_so_in_its_label(tmp_path):
    write_run(tmp_path / "tree", [Problem(id=f"mine-{i}", question="What is 3 + 4?", gold="7") for i in (1, 2, 3)])
    for i, dtype in [(1, "float16"), (2, "bfloat16"), (3, "float16")]:
        trace_path = tmp_path / "tree" / "traces" / f"mine-{i}.json"
        trace = json.loads(trace_path.read_text())
        trace["config"].update(dtype=dtype, method="batched-lookup")
        trace_path.write_text(json.dumps(trace))
    label = run_label(tmp_path / "tree")
    assert label.endswith("float16, batched-lookup on 2 problems; bfloat16, batched-lookup on 1 problems)")
    trace_path = tmp_path / "tree" / "traces" / "mine-2.json"
    trace = json.loads(trace_path.read_text())
    trace["config"].update(dtype="float16")
    trace_path.write_text(json.dumps(trace))  # one dtype for every problem again: no counts
    assert run_label(tmp_path / "tree").endswith(", float16, batched-lookup)")


def test_a_pool_grown_in_two_runs_joins_its_rows_in_index_order(tmp_path):
    write_run(tmp_path / "tree", [Problem(id="mine-1", question="What is 3 + 4?", gold="7")])
    write_pool(tmp_path / "pool", [("mine-1", "7", ["8", "8"], [4, 4], "7")])
    later = {"problem_id": "mine-1", "samples": ["ANSWER: 7", "ANSWER: 7", "ANSWER: 7"],
             "finish_reasons": ["eos", "eos", "length"], "sample_token_counts": [6, 6, 6],
             "sample_indices": [3, 4, 5], "settings": {"task": "report-test", "dtype": "bfloat16"}}
    with (tmp_path / "pool" / "cot_samples.jsonl").open("a") as handle:
        handle.write(json.dumps(later) + "\n")
    text, points = comparison_report([tmp_path / "pool", tmp_path / "tree"], lambda name: task())
    k4 = next(p for p in points if p.label.startswith("self-consistency K=4"))
    # 5 chains: 8, 8, 7, 7 and a cut-off 7 that does not vote; the 5 subsets of 4 leave out one chain:
    # an 8 (7 wins, twice), a 7 (8 wins, twice) or the cut-off one (a 2-2 tie, 1/2)
    assert "of 5 sampled chains" in k4.label and k4.tokens == pytest.approx(4 * 26 / 5)
    assert k4.per_problem == pytest.approx([(1 + 1 + 0 + 0 + 0.5) / 5])
    assert "pool, sampled in bfloat16 (3 chains) and float16 (2 chains);" in text  # grown on another machine


def test_a_second_writer_of_a_pool_is_refused(tmp_path):
    from seed_tot.errors import SeedTotError
    from seed_tot.training.value.rollouts import hold_output

    first = hold_output(tmp_path / "cot_samples.jsonl")
    with pytest.raises(SeedTotError, match="Another collection is writing"):
        hold_output(tmp_path / "cot_samples.jsonl")
    first.close()
    hold_output(tmp_path / "cot_samples.jsonl").close()  # free again once the first writer is gone


def test_a_rated_pool_adds_best_of_k_on_the_same_chains_and_tokens(tmp_path):
    write_run(tmp_path / "tree", [Problem(id=f"mine-{i}", question="What is 3 + 4?", gold="7") for i in (1, 2)])
    write_pool(tmp_path / "pool", [
        ("mine-1", "7", ["8", "8", "7", "9"], [10, 10, 10, 10], "7"),
        ("mine-2", "7", ["7", "7", "6", "5"], [20, 20, 20, 20], "8"),
    ])
    rated = {("mine-1", 3): 0.9, ("mine-2", 4): 0.8}  # mine-2: the best-valued chain is wrong
    with (tmp_path / "pool" / "chain_values.jsonl").open("w") as handle:
        for pid in ("mine-1", "mine-2"):
            for index in range(1, 5):
                handle.write(json.dumps({"problem_id": pid, "sample_index": index,
                                         "value": rated.get((pid, index), 0.1)}) + "\n")
    text, points = comparison_report([tmp_path / "pool", tmp_path / "tree"], lambda name: task())
    by_label = {p.label.split(" reranked")[0]: p for p in points}
    best4, vote4 = by_label["best-of-K K=4"], by_label["self-consistency K=4 (all of 4 sampled chains)"]
    assert best4.per_problem == [1.0, 0.0] and vote4.per_problem == [0.0, 1.0]
    assert best4.tokens == vote4.tokens == 60
    assert "best-of-K vs self-consistency at K=4 (the same chains and tokens): +0.0 points" in text
    assert "at K=1 " not in text
    plot = draw(points, tmp_path / "plot.png", [tmp_path / "pool", tmp_path / "tree"])
    assert plot.stat().st_size > 1000


def test_a_pool_with_some_chains_unrated_shows_no_best_of_k(tmp_path):
    write_run(tmp_path / "tree", [Problem(id="mine-1", question="What is 3 + 4?", gold="7")])
    write_pool(tmp_path / "pool", [("mine-1", "7", ["8", "7"], [10, 10], "7")])
    (tmp_path / "pool" / "chain_values.jsonl").write_text(
        json.dumps({"problem_id": "mine-1", "sample_index": 1, "value": 0.5}) + "\n")
    text, points = comparison_report([tmp_path / "pool", tmp_path / "tree"], lambda name: task())
    assert not any(p.label.startswith("best-of-K") for p in points) and "best-of-K" not in text


def test_two_tree_runs_are_set_against_each_other_by_problem(tmp_path):
    """Same problems, same chains (answer 7, the gold); one tree's thoughts answer 7, the other's 5."""
    def tree_answering(answer):
        def reply(prompt, request):
            return "ANSWER: 7" if prompt.startswith("SOLVE") else (f"ANSWER: {answer}" if prompt.startswith("THINK") else "9")
        return lambda executor: BFS(task(), ScriptedExecutor(TOKENIZER, reply), FORMATTER,
                                    BFSConfig(n_thoughts=3, depth=1, value_samples=1, cot_samples=0))

    problems = [Problem(id=f"mine-{i}", question="What is 3 + 4?", gold="7") for i in (1, 2, 3)]
    write_run(tmp_path / "right", problems, search=tree_answering(7))
    write_run(tmp_path / "wrong", problems, search=tree_answering(5))
    text, _ = comparison_report([tmp_path / "right", tmp_path / "wrong"], lambda name: task())
    lines = [line for line in text.splitlines() if " vs run right " in line]
    assert len(lines) == 2
    assert lines[0].startswith("- search's own choice: run wrong (") and lines[1].startswith("- ToT final")
    for line in lines:  # the leaves outvote the one chain in the final answer too
        assert "-100.0 points" in line and line.endswith("the first named is worse")
    alone, _ = comparison_report([tmp_path / "right"], lambda name: task())
    assert " vs run " not in alone  # one run: nothing to pair


def test_the_plot_takes_its_numbers_from_the_points_not_their_labels(tmp_path):
    from seed_tot.observe.comparison.points import BEST_OF_K, GREEDY, RUN, SELF_CONSISTENCY, Point

    points = [Point("chains, greedy", [1.0, 0.0], 10, GREEDY),
              Point("vote of two", [1.0, 1.0], 20, SELF_CONSISTENCY, k=2),
              Point("best of two", [0.0, 1.0], 20, BEST_OF_K, k=2),
              Point("a tree", [0.0, 1.0], 30, RUN, name="tree")]
    assert draw(points, tmp_path / "plot.png", ["folder"]).stat().st_size > 0
