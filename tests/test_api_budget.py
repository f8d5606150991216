"""The API's work budget: the upper bound on a request's generated tokens, computed from its
settings before any work, and the setting a refusal tells the client to lower."""

import pytest

from seed_tot.cli.api_server.budget import Work, expansions, heaviest_setting, over_budget, token_bound, work_of
from seed_tot.search import SearchConfig
from seed_tot.search.bfs import BFSConfig
from seed_tot.search.mcts import MCTSConfig
from seed_tot_tasks import get_task

BFS = Work(search="bfs", trees=1, n_thoughts=3, depth=4, breadth=2, iterations=1, thought_tokens=100,
           value_samples=3, value_tokens=10, chains=5, second_round=4, chain_tokens=200)


def test_a_bfs_step_expands_at_most_breadth_states_and_the_first_only_the_root():
    assert expansions(BFS) == 1 + 3 * 2
    # 7 states x 3 thoughts x (100 + 3 x 10) + 9 chains x 200
    assert token_bound(BFS) == 7 * 3 * 130 + 9 * 200


def test_mcts_expands_down_to_the_depth_limit_every_iteration():
    mcts = Work(**{**BFS.__dict__, "search": "mcts", "iterations": 10, "depth": 4})
    assert expansions(mcts) == 1 + 10 * 3
    assert token_bound(mcts) == 31 * 3 * 130 + 9 * 200


def test_best_of_n_rates_whole_chains_and_self_consistency_only_votes():
    best = Work(**{**BFS.__dict__, "search": "best-of-n"})
    assert token_bound(best) == 3 * (200 + 30) + 9 * 200
    chains_only = Work(**{**BFS.__dict__, "search": "self-consistency"})
    assert token_bound(chains_only) == 9 * 200


def test_n_multiplies_everything():
    assert token_bound(Work(**{**BFS.__dict__, "trees": 8})) == 8 * token_bound(BFS)


def test_the_refusal_names_the_setting_raised_most_above_the_default_the_bound_and_the_budget():
    huge = Work(**{**BFS.__dict__, "n_thoughts": 32, "depth": 5})
    assert heaviest_setting(huge, BFS) == "seed_tot.n_thoughts"
    message = over_budget(huge, BFS, 10_000)
    assert f"{token_bound(huge):,} tokens" in message and "10,000" in message and "seed_tot.n_thoughts" in message
    assert over_budget(BFS, BFS, token_bound(BFS)) is None
    assert heaviest_setting(Work(**{**BFS.__dict__, "trees": 8}), BFS) == "n"
    long = Work(**{**BFS.__dict__, "chain_tokens": 8192, "thought_tokens": 8192})
    assert heaviest_setting(long, BFS) == "max_tokens"
    assert heaviest_setting(Work(**{**BFS.__dict__, "value_tokens": 4000}), BFS) == "seed_tot.value_max_tokens"


def test_defaults_over_the_budget_name_the_setting_whose_halving_saves_most():
    assert heaviest_setting(BFS, BFS) == "max_tokens"  # thoughts and chains both halve
    wide = Work(**{**BFS.__dict__, "breadth": 8, "n_thoughts": 2})
    assert heaviest_setting(wide, wide) == "seed_tot.depth"  # 1 + 3 x 8 states -> 1 + 1 x 8 saves more than 2 -> 1 thoughts


def test_work_of_reads_the_search_config_and_the_task():
    gsm8k = get_task("gsm8k")
    config = BFSConfig(n_thoughts=4, breadth=2, value_samples=2, cot_samples=3, escalate_samples=2)
    work = work_of(config, "bfs", 2, gsm8k)
    assert (work.trees, work.n_thoughts, work.breadth, work.depth) == (2, 4, 2, gsm8k.default_depth)
    assert (work.thought_tokens, work.value_tokens, work.chain_tokens) == (256, 128, 512)
    assert (work.value_samples, work.chains, work.second_round) == (2, 4, 2)
    # greedy thoughts: no sampled chains; logit values generate nothing
    greedy = config.model_copy(update={"thought_decode": config.thought_decode.model_copy(update={"temperature": 0.0}),
                                       "value_mode": "logits"})
    work = work_of(greedy, "bfs", 1, gsm8k)
    assert (work.chains, work.second_round, work.value_samples) == (1, 0, 0)
    # Creative Writing has no chain-of-thought prompt: no chains at all
    assert work_of(MCTSConfig(iterations=5), "mcts", 1, get_task("creative_writing")).chains == 0


@pytest.mark.parametrize("search, config", [("bfs", BFSConfig()), ("mcts", MCTSConfig()),
                                            ("self-consistency", SearchConfig())])
def test_the_bound_is_positive_for_every_default(search, config):
    assert token_bound(work_of(config, search, 1, get_task("gsm8k"))) > 0
