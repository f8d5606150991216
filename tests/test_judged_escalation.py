"""scripts/judged_escalation.py and seed_tot/search/escalation.py: when a judged vote draws more chains."""

import pytest
from script_helpers import load_script

from seed_tot.search.escalation import needs_more_chains, winning_share

escalation = load_script("judged_escalation")
RatedProblem = escalation.RatedProblem


def test_the_winning_share_is_the_top_answers_part_of_the_summed_values():
    assert winning_share({"3": 0.9, "4": 0.3}) == pytest.approx(0.75)
    assert winning_share({}) == 0.0 and winning_share({"3": 0.0}) == 0.0
    assert needs_more_chains({"3": 0.9, "4": 0.3}, 0.8) and not needs_more_chains({"3": 0.9, "4": 0.3}, 0.75)
    assert not needs_more_chains({}, 0.0)  # a threshold of 0 never escalates


def split_problem():
    """The greedy chain and round 1 lean wrong ("4"); round 2 brings confident right chains ("3")."""
    wrong, right = ("4", 0.4, 100), ("3", 0.9, 10)
    return RatedProblem(greedy=wrong, samples=[wrong, wrong, right, wrong] + [right] * 4, correct={"3"})


def test_a_sure_vote_stops_after_round_one_and_an_unsure_one_draws_the_next_round():
    problem = split_problem()
    order = list(range(8))
    # round 1: "4" holds 1.6 of 2.5 (share 0.64); round 2 adds 3.6 for "3"
    assert escalation.escalate(problem, order, (4, 4), 0.6) == (0.0, 100 + 310, 1)
    assert escalation.escalate(problem, order, (4, 4), 0.7) == (1.0, 100 + 350, 2)
    assert escalation.escalate(problem, order, (4, 4), 2.0)[2] == 2  # above 1: always every round


def test_ties_go_to_the_greedy_answer_and_unvalued_chains_do_not_vote():
    votes, credit = escalation.judged_vote(("3", 0.5, 1), [("4", 0.5, 1), (None, None, 1)], {"3"})
    assert dict(votes) == {"3": 0.5, "4": 0.5} and credit == 1.0
    assert escalation.judged_vote(None, [("4", 0.5, 1), ("3", 0.5, 1)], {"3"})[1] == 0.5


def test_the_threshold_is_the_smallest_within_tolerance_of_always_escalating():
    problems = {f"p{i}": split_problem() for i in range(3)}
    problems["sure"] = RatedProblem(greedy=("3", 0.9, 1), samples=[("3", 0.9, 1)] * 8, correct={"3"})
    threshold, grid = escalation.choose_threshold(problems, (4, 4), tolerance=0.0, count=20, seed=0)
    always = grid[0]["always_all_rounds"]
    assert always == max(row["correct"] for row in grid[1:])
    chosen = next(row for row in grid[1:] if row["threshold"] == threshold)
    assert chosen["correct"] == pytest.approx(always)
    assert all(row["correct"] < always for row in grid[1:] if row["threshold"] < threshold)
    assert chosen["tokens"] <= grid[-1]["tokens"]


def test_the_plain_vote_of_8_and_the_comparison_rows():
    problems = {"a": split_problem()}
    credit, tokens = escalation.plain_vote(problems, 8)
    assert credit == [1.0] and tokens == pytest.approx(3 * 100 + 5 * 10)  # "3" 5 against "4" 3
    rows = escalation.compare(problems, (4, 4), 0.7, count=10, seed=0, resamples=100)
    assert [row["rule"] for row in rows] == ["plain vote of 8 samples", "escalating vote, up to 1 round(s)",
                                             "escalating vote, up to 2 round(s)", "always 2 round(s)"]
    assert rows[-1]["tokens"] == pytest.approx(100 + 350) and rows[-1]["mean_rounds"] == 2
