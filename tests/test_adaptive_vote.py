"""The adaptive plain vote simulated on stored chains: draws more only while unsure, never past its cap,
and answers by the vote's own tie rule."""

import pytest

from seed_tot.analysis.adaptive_vote import Pool, expected, one_order, vote_credit


def pool(greedy, samples, correct=("7",)):
    return Pool(greedy, 100, samples, [10 * (i + 1) for i in range(len(samples))], frozenset(correct))


def test_a_sure_first_round_draws_nothing_more():
    p = pool("7", ["7", "7", "7", "7", "8", "8", "8", "8"])
    credit, tokens, drawn = one_order(p, list(range(8)), first=4, step=2, cap=8, threshold=0.7)
    assert (credit, drawn) == (1.0, 4) and tokens == 100 + 10 + 20 + 30 + 40


def test_an_unsure_vote_draws_rounds_until_sure_or_the_cap():
    p = pool("8", ["7", "8", "7", "9", "7", "7", "7", "7"])
    # after 4: 8, 7, 8, 7, 9 -> 2/5; after 6: 7 holds 4/7 = 0.57; after 8: 6/9 = 0.67 < 0.7 but capped
    assert one_order(p, list(range(8)), 4, 2, 8, 0.7)[2] == 8
    assert one_order(p, list(range(8)), 4, 2, 8, 0.55)[2] == 6
    assert one_order(p, list(range(8)), 4, 2, 6, 0.7)[2] == 6


def test_nothing_voted_is_unsure_and_scores_nothing():
    p = pool(None, [None] * 6)
    credit, _, drawn = one_order(p, list(range(6)), 4, 2, 6, 0.0)
    assert (credit, drawn) == (0.0, 4)  # a threshold of 0 never draws more
    assert one_order(p, list(range(6)), 4, 2, 6, 0.5)[2] == 6


@pytest.mark.parametrize("votes, greedy, credit", [
    (["7", "8"], "8", 0.0),  # the tie goes to the greedy chain's answer
    (["7", "8"], None, 0.5),  # no greedy vote: split evenly
    (["7", "7", "8"], "8", 1.0),  # no tie: the majority
    ([], "7", 0.0),
])
def test_the_vote_credit(votes, greedy, credit):
    assert vote_credit(votes, greedy, frozenset({"7"})) == credit


def test_the_expectation_is_seeded_and_between_its_bounds():
    p = pool("8", ["7", "8", "7", "9", "7", "7", "8", "7"])
    first = expected(p, 4, 2, 8, 0.7, orders=50, seed=3)
    assert first == expected(p, 4, 2, 8, 0.7, orders=50, seed=3)
    credit, tokens, drawn = first
    assert 0.0 <= credit <= 1.0 and 4 <= drawn <= 8 and 100 + 100 <= tokens <= 100 + 360
