"""scripts/tree_leaf_ceiling.py counts a tree's right answer leaves apart from its chains of thought."""

from click.testing import CliRunner
from script_helpers import load_script
from viewer_helpers import viewer_trace, write_run

from seed_tot.observe.trace_view import node_answers
from seed_tot_tasks import bundled_task

ceiling = load_script("tree_leaf_ceiling")


def test_tree_leaves_and_chains_are_counted_apart():
    trace = viewer_trace()
    answers = node_answers(trace, bundled_task)
    chains = {n.id for n in trace.nodes if n.info.get("cot") or n.info.get("cot_sample")}
    tree_answers = [answers[i] for i in answers if answers[i] is not None and i not in chains]
    counts = ceiling.leaf_counts(trace)
    assert counts["tree_answers"] == len(tree_answers) and counts["tree_right"] == tree_answers.count("18")
    assert (counts["chain_right"], counts["chain_answers"]) == (1, 2)  # the greedy chain's 18, the sample's 20


def test_the_table_names_each_run(tmp_path):
    run = write_run(tmp_path)
    result = CliRunner().invoke(ceiling.main, [str(run)])
    assert result.exit_code == 0, result.output
    assert "| run | 2 | " in result.output
