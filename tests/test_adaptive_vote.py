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


def judged_pool(greedy, greedy_value, samples, values, correct=("7",)):
    return Pool(greedy, 100, samples, [10] * len(samples), frozenset(correct), greedy_value, values)


def test_a_judged_vote_weighs_chains_by_their_values_and_stops_on_the_share_of_values():
    p = judged_pool("8", 0.1, ["8", "8", "7", "7", "7", "7"], [0.1, 0.1, 0.9, 0.9, 0.9, 0.9])
    # after 4 plain: 8 holds 3 of 5 votes (0.6: sure at 0.6, and wrong); judged: 7 holds 1.8 of 2.1
    assert one_order(p, list(range(6)), 4, 2, 6, 0.6)[0::2] == (0.0, 4)
    credit, _, drawn = one_order(p, list(range(6)), 4, 2, 6, 0.8, judged=True)
    assert (credit, drawn) == (1.0, 4)
    assert one_order(p, list(range(6)), 4, 2, 6, 0.9, judged=True)[2] == 6  # 1.8/2.1 = 0.857 < 0.9: two more


def test_a_chain_without_a_value_casts_no_judged_vote():
    p = judged_pool(None, None, ["8", "7"], [None, 0.4])
    assert one_order(p, [0, 1], 2, 2, 2, 0.5, judged=True)[0] == 1.0


def test_the_judged_rounds_are_the_escalation_studys_on_random_pools():
    """Rounds of 4 up to 8 samples: the same credit, tokens and rounds as scripts/judged_escalation.py."""
    import random

    from script_helpers import load_script

    escalation = load_script("judged_escalation")
    rng = random.Random(7)
    for _ in range(300):
        answers = [rng.choice(["7", "8", "9", None]) for _ in range(9)]
        values = [round(rng.random(), 3) if a is not None else None for a in answers]
        tokens = [rng.randint(5, 50) for _ in range(9)]
        p = Pool(answers[0], tokens[0], answers[1:], tokens[1:], frozenset({"7"}), values[0], values[1:])
        rated = escalation.RatedProblem((answers[0], values[0], tokens[0]),
                                        list(zip(answers[1:], values[1:], tokens[1:])), {"7"})
        order = rng.sample(range(8), 8)
        threshold = rng.choice([0.5, 0.7, 0.9])
        credit, spent, drawn = one_order(p, order, 4, 4, 8, threshold, judged=True)
        assert (credit, spent, drawn // 4) == escalation.escalate(rated, order, (4, 4), threshold)
