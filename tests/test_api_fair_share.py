"""The API driver's fair share of the batch: how many waiting requests of each batch join the
session, so that one large request cannot widen every decode step for the others."""

from seed_tot.cli.api_server.lanes import joining


def test_alone_a_request_joins_up_to_the_larger_bound():
    assert joining([("big", 0, 500)], share=16, alone=64) == [64]
    assert joining([("big", 60, 500)], share=16, alone=64) == [4]


def test_beside_others_each_request_keeps_to_its_share():
    flights = [("big", 0, 500), ("small", 0, 3), ("big", 0, 40), ("other", 15, 5)]
    assert joining(flights, share=16, alone=64) == [16, 3, 0, 1]


def test_a_request_over_its_share_waits_and_nothing_goes_negative():
    assert joining([("big", 40, 100), ("small", 2, 2)], share=16, alone=64) == [0, 2]


def test_the_batches_of_one_request_share_its_rows_in_order():
    assert joining([("r", 10, 4), ("r", 0, 9), ("s", 0, 1)], share=16, alone=64) == [4, 2, 1]
