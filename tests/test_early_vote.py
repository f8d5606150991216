"""A plain vote stops its chains once they can no longer change it: the same answer (and the same
second round) as the whole vote, at fewer tokens. Checked on the rule itself and on scripted chains
that end at different decode steps of a continuous-batching session."""

import random
import zlib

import pytest
from scripted_executor import ScriptedExecutor
from search_helpers import FORMATTER, TOKENIZER
from test_report import task

from seed_tot.requests import GenerationResult, GenerationStats
from seed_tot.search import SearchConfig, SelfConsistency
from seed_tot.search.driver import solve_many
from seed_tot.search.early_vote import plain_vote_decided
from seed_tot.task import Problem

PROBLEM = Problem("p", "q?", "7")


@pytest.mark.parametrize("answers, running, threshold, decided", [
    (["7", "7", "7"], 2, None, True),  # 3 against at most 2: no ending of the other two changes it
    (["7", "7", "8"], 2, None, False),  # 2 against 1 + 2
    (["7", "7"], 2, None, False),  # 2 against 0 + 2 could tie
    (["7", None, "7", "7"], 1, None, True),  # a chain that casts no vote counts for nobody
    ([None, None], 3, None, False),  # nothing voted yet
    (["7", "7", "7"], 2, 0.7, False),  # the winner holds 3/5 = 0.6 at worst: a second round may follow
    (["7", "7", "7", "7"], 1, 0.7, True),  # 4/5 = 0.8 at worst: surely no second round
    (["7", "7", "7"], 2, 0.0, True),  # a threshold of 0 never draws one
])
def test_the_rule(answers, running, threshold, decided):
    assert plain_vote_decided(answers, running, threshold) is decided


class ScriptedSession:
    """Continuous batching over scripted replies: a request's reply is decoded one token a step, so
    a longer reply ends later; cancelled requests leave at once."""

    def __init__(self, executor: "ScriptedSessions"):
        self.executor, self.rows, self.next_ticket = executor, {}, 0

    @property
    def busy(self):
        return bool(self.rows)

    @property
    def width(self):
        return len(self.rows)

    def add(self, requests):
        tickets = []
        for request in requests:
            text = self.executor.reply(FORMATTER.tokenizer.decode(request.prompt_ids), request)
            self.rows[self.next_ticket] = [request, text, 0]
            tickets.append(self.next_ticket)
            self.next_ticket += 1
        return tickets

    def cancel(self, tickets):
        for ticket in tickets:
            if self.rows.pop(ticket, None) is not None:
                self.executor.cancelled += 1

    def step(self):
        ended = []
        for ticket, row in list(self.rows.items()):
            request, text, done = row
            ids = TOKENIZER.encode(text, add_special_tokens=False)
            row[2] = done + 1
            self.executor.decoded += 1
            if row[2] >= len(ids):
                del self.rows[ticket]
                stats = GenerationStats(new_tokens=len(ids), target_forwards=len(ids))
                ended.append((ticket, GenerationResult(request.request_id, ids, text, "eos", stats)))
        return ended


class ScriptedSessions:
    name = "scripted-sessions"

    def __init__(self, reply):
        self.reply, self.cancelled, self.decoded = reply, 0, 0

    def run(self, requests):
        raise AssertionError("the continuous driver uses sessions")

    def session(self):
        return ScriptedSession(self)

    def close(self):
        pass


def chains_reply(answers: dict[int, str], lengths: dict[int, int]):
    """Chain i answers answers[i] after lengths[i] filler characters (one token each)."""
    def reply(prompt, request):
        index = int(request.request_id.rsplit("cot", 1)[1])
        return "x" * lengths[index] + f" ANSWER: {answers[index]}"
    return reply


class FakeJudge:
    """A learned judge's stand-in: a fixed value in (0.05, 0.95) for each chain's text; counts its reads."""

    head_id = "fake"

    def __init__(self):
        self.reads = 0

    def values(self, task, problem, states, answers=None):
        self.reads += len(states)
        return [0.05 + 0.9 * (zlib.crc32(state.encode()) % 1000) / 1000 for state in states]


def run_both(answers, lengths, judge=None, **config):
    config = SearchConfig(cot_samples=4, **config)  # greedy + 4, then escalate_samples more where unsure
    reply = chains_reply(answers, lengths)
    whole = SelfConsistency(task(), ScriptedExecutor(TOKENIZER, reply), FORMATTER, config, judge=judge).run(PROBLEM)
    sessions = ScriptedSessions(reply)
    search = SelfConsistency(task(), sessions, FORMATTER, config, judge=judge)
    [early] = list(solve_many(search.steps, [PROBLEM], sessions, concurrency=1))
    return whole, early, sessions


def test_three_agreeing_chains_of_five_end_the_vote_and_the_rest_are_cancelled():
    answers = {0: "7", 1: "7", 2: "8", 3: "7", 4: "9"}
    lengths = {0: 10, 1: 20, 2: 30, 3: 40, 4: 200}
    whole, early, sessions = run_both(answers, lengths)
    assert whole.answer == early.answer == "7"
    assert sessions.cancelled == 1  # chain 4 was still decoding when chains 0, 1 and 3 agreed
    [cancelled] = [node for node in early.tree.nodes() if node.info.get("finish_reason") == "cancelled"]
    assert cancelled.info["cot_sample"] == 4 and cancelled.info["rejected"].startswith("cancelled")
    assert early.metrics.new_tokens < whole.metrics.new_tokens
    assert early.selection.votes == {"7": 3, "8": 1}


def test_no_chain_is_cancelled_where_the_vote_is_off_or_weighted_without_a_judge():
    answers = {0: "7", 1: "7", 2: "7", 3: "8", 4: "9"}
    lengths = {0: 10, 1: 20, 2: 30, 3: 40, 4: 200}
    for config in (dict(stop_when_decided=False), dict(vote_weight="value")):
        whole, early, sessions = run_both(answers, lengths, **config)
        assert sessions.cancelled == 0 and early.metrics.new_tokens == whole.metrics.new_tokens


@pytest.mark.parametrize("escalate", [0, 4])
@pytest.mark.parametrize("judged", [False, True])
def test_the_early_stop_never_changes_the_answer_nor_the_second_round(escalate, judged):
    """Random votes and lengths, plain or weighted by a judge: the answer, and whether a second round
    was drawn, match the whole vote; the judge reads no chain twice."""
    rng = random.Random(escalate)
    stopped = stopped_second = 0
    for _ in range(60):
        chains = 5 + escalate
        answers = {i: rng.choice("778899") for i in range(chains)}
        lengths = {i: rng.randint(1, 60) for i in range(chains)}
        judge = FakeJudge() if judged else None
        config = dict(value_mode="learned", vote_weight="value", escalate_below=0.6) if judged else {}
        whole, early, sessions = run_both(answers, lengths, judge=judge, escalate_samples=escalate, **config)
        assert early.answer == whole.answer
        second = lambda result: [node for node in result.tree.nodes() if node.info.get("cot_sample", 0) >= 5]
        assert len(second(early)) == len(second(whole))
        if judged:
            rated = lambda result: {node.info.get("cot_sample", 0): node.value for node in result.tree.nodes()
                                    if node.value is not None}
            assert all(rated(whole)[i] == value for i, value in rated(early).items())
            assert judge.reads <= len(rated(whole)) + len(rated(early))  # each run reads a chain once
        stopped += sessions.cancelled > 0
        stopped_second += any(node.info.get("finish_reason") == "cancelled" for node in second(early))
    assert stopped > 0  # the rule did stop some votes early
    if escalate:
        assert stopped_second > 0  # and some second rounds


def test_the_api_server_stops_a_decided_vote_as_the_cli_does():
    """The API server's driver feeds its session through the same flights: the same vote stops there too."""
    import threading

    from seed_tot.cli.api_server.driver import TreeDriver
    from seed_tot.cli.api_server.jobs import Job

    answers = {0: "7", 1: "7", 2: "8", 3: "7", 4: "9"}
    lengths = {0: 10, 1: 20, 2: 30, 3: 40, 4: 200}
    whole, cli, cli_sessions = run_both(answers, lengths)
    sessions = ScriptedSessions(chains_reply(answers, lengths))
    driver = TreeDriver(lambda: sessions, concurrency=1, finish=lambda job, result: result)
    done, values = threading.Event(), []
    search = SelfConsistency(task(), sessions, FORMATTER, SearchConfig(cot_samples=4))
    driver.submit([Job("p", search, PROBLEM, on_done=lambda value: (values.append(value), done.set()))])
    assert done.wait(30)
    driver.close()
    [served] = values
    assert served.answer == cli.answer == whole.answer == "7"
    assert sessions.cancelled == cli_sessions.cancelled == 1
    assert served.metrics.new_tokens == cli.metrics.new_tokens < whole.metrics.new_tokens
