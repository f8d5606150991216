"""Value mode "logits": scoring requests (score_tokens) in the executors, and the State Evaluator's
value read from the verdict words' next-token probabilities (tiny float32 pair, byte tokenizer)."""

import math

import pytest
import torch
from scripted_executor import ScoringByModel
from search_helpers import FORMATTER, PROBLEM, make_task, tiny_config

from seed_tot.config import DecodeConfig
from seed_tot.errors import ConfigError
from seed_tot.reasoning.evaluator import StateEvaluator, verdict_tokens
from seed_tot.reasoning.prompting import PromptFormatter
from seed_tot.requests import GenerationRequest
from seed_tot.scheduling.factory import make_executor
from seed_tot.scheduling.session import DecodeSession
from seed_tot.search import BFS, BFSConfig

SCORED = (45, 77, 3, 256)  # token ids (the byte tokenizer's ids are not the bytes' values)
TEXTS = ["Is 6 * 7 = 42? Answer: ", "Hello world", "Is 6 * 7 = 42? Answer: "]


def hand_logprobs(target, prompt_ids, ids):
    """log-softmax of the model's own logits after the whole prompt, no cache, no batching."""
    with torch.no_grad():
        logits = target.model(torch.tensor([prompt_ids])).logits[0, -1].float()
    return torch.log_softmax(logits, -1)[list(ids)].tolist()


@pytest.mark.parametrize("method", ["ar", "batched", "batched-lookup", "batched-sd", "lookahead"])
def test_scoring_requests_return_the_models_next_token_logprobs(tiny_pair, method):
    draft, target = tiny_pair
    tok = target.tokenizer
    scoring = [GenerationRequest(tok.encode(t), seed=i, request_id=f"s{i}", score_tokens=SCORED)
               for i, t in enumerate(TEXTS)]
    generating = GenerationRequest(tok.encode("Hello"), DecodeConfig(max_new_tokens=6), seed=9, request_id="g")
    executor = make_executor(method, target, draft if method == "batched-sd" else None)
    alone = executor.run([generating])[0]
    results = executor.run([scoring[0], generating, scoring[1], scoring[2]])  # mixed with a generation
    assert [r.request_id for r in results] == ["s0", "g", "s1", "s2"]
    for request, result in zip(scoring, [results[0], results[2], results[3]]):
        assert result.token_ids == [] and result.stats.new_tokens == 0
        assert result.candidate_logprobs == pytest.approx(hand_logprobs(target, request.prompt_ids, SCORED), abs=1e-4)
    assert results[1].token_ids == alone.token_ids  # the generation is not disturbed
    assert results[0].candidate_logprobs != pytest.approx(results[2].candidate_logprobs, abs=1e-3)


def test_a_session_that_cannot_score_refuses_in_one_sentence():
    class NoScoring(DecodeSession):
        def _join(self, queued):
            raise AssertionError("never reached")

        def _step(self):
            return []

        def _remove(self, tickets):
            raise AssertionError("never reached")

    class Seed:
        name = "seed"

    session = NoScoring()
    session.ex = Seed()  # as SEED's session holds its executor
    request = GenerationRequest([1, 2, 3], score_tokens=(1,))
    with pytest.raises(ConfigError, match="^The seed executor cannot .*--value-mode samples"):
        session.add([request])
    assert session.add([GenerationRequest([1, 2, 3])]) == [0]  # generation requests are welcome


YES_NO = {"yes": 1.0, "no": 0.0, "nope": 0.5}  # "no" and "nope" share their first byte


def verdict_task(prefix="Answer: ", values=YES_NO):
    task = make_task(depth=1)
    task.verdict_values = values
    task.verdict_prefix = prefix
    return task


def hand_value(target, prompt_ids):
    """Expectation of the verdict values under the renormalised first-byte probabilities; a
    first byte shared by two words ("n": no, nope) gives each half its probability."""
    ids = [target.tokenizer.encode(c)[0] for c in "yYnN"]
    y, Y, n, N = (math.exp(lp) for lp in hand_logprobs(target, prompt_ids, ids))
    p_yes, p_no, p_nope = y + Y, (n + N) / 2, (n + N) / 2
    return (p_yes * 1.0 + p_no * 0.0 + p_nope * 0.5) / (p_yes + p_no + p_nope), p_yes + p_no + p_nope


def run_logit_bfs(target, task, method="batched"):
    config = tiny_config(BFSConfig, depth=1, n_thoughts=3, value_mode="logits", cot_candidate=False)
    executor = ScoringByModel(make_executor(method, target), reply=lambda request: f" idea{request.seed % 1000} ")
    return BFS(task, executor, PromptFormatter(target.tokenizer), config).run(PROBLEM)


@pytest.mark.parametrize("method", ["batched", "ar"])
def test_logit_value_is_the_expectation_under_the_models_own_softmax(tiny_pair, method):
    _, target = tiny_pair
    task = verdict_task()
    result = run_logit_bfs(target, task, method)
    children = result.tree.children(0)
    assert len(children) == 3
    for child in children:
        prompt = task.value_prompt(PROBLEM, child.state, 0)
        assert prompt.endswith("\n")  # no chat template: the reply (and its prefix) starts on a new line
        prompt_ids = target.tokenizer.encode(prompt + "Answer: ")
        expected, mass = hand_value(target, prompt_ids)
        assert child.value == pytest.approx(expected, rel=1e-4)
        assert child.info["verdict_mass"] == pytest.approx(mass, rel=1e-3)
        assert sum(child.info["verdict_probs"].values()) == pytest.approx(1.0)
        assert child.info["verdict_probs"]["no"] == pytest.approx(child.info["verdict_probs"]["nope"])
        assert child.evaluation.new_tokens == 0 and child.raw_values == []
        # negative control: the same words read where the reply would start without the prefix differ
        unprefixed, _ = hand_value(target, target.tokenizer.encode(prompt))
        assert abs(unprefixed - child.value) > 1e-3


def test_verdict_words_that_all_share_their_first_token_are_refused():
    # "Answer:" then a space: with a byte tokenizer every word begins with the token " "
    with pytest.raises(ConfigError, match="same token.*--value-mode samples"):
        verdict_tokens(verdict_task(prefix="Answer:"), FORMATTER)
    tokens = verdict_tokens(verdict_task(), FORMATTER)
    assert tokens.token_ids == tuple(sorted(FORMATTER.tokenizer.encode(c)[0] for c in "yYnN"))


def test_a_task_without_verdict_words_is_refused_in_logit_mode():
    with pytest.raises(ConfigError, match="verdict words.*--value-mode samples"):
        StateEvaluator(make_task(), FORMATTER, DecodeConfig(), 0, mode="logits")


def test_an_executor_that_generates_instead_of_scoring_is_a_clear_error():
    from scripted_executor import ScriptedExecutor
    from search_helpers import TOKENIZER

    config = BFSConfig(depth=1, n_thoughts=2, value_mode="logits", cot_candidate=False)
    executor = ScriptedExecutor(TOKENIZER, lambda prompt, request: " idea ")
    with pytest.raises(ConfigError, match="no verdict log-probabilities"):
        BFS(verdict_task(), executor, FORMATTER, config).run(PROBLEM)


@pytest.mark.parametrize("method", ["batched", "batched-lookup"])
def test_logit_values_are_the_same_in_a_continuous_session_of_many_problems(tiny_pair, method):
    """Thoughts and scoring requests of three problems share one continuous-batching session."""
    from seed_tot.search.driver import solve_many
    from seed_tot.task import Problem

    _, target = tiny_pair
    stops = tuple("abcdefghijklmnopqrstuvwxyz 0123456789")  # a thought ends at its first such byte
    config = tiny_config(BFSConfig, depth=2, n_thoughts=2, value_mode="logits", cot_candidate=False,
                         thought_decode=DecodeConfig(max_new_tokens=12, temperature=1.0, stop=stops))
    problems = [Problem(id=f"p{i}", question=q, gold="1") for i, q in enumerate(["1+0?", "What is 6 * 7?", "2-1?"])]
    search = BFS(verdict_task(), make_executor(method, target), PromptFormatter(target.tokenizer), config)
    alone = {p.id: search.run(p) for p in problems}
    together = {r.problem.id: r for r in solve_many(search.steps, problems, search.executor, concurrency=3)}
    rated = 0
    for pid, result in alone.items():
        other = list(together[pid].tree.nodes())
        assert [(n.id, n.state) for n in result.tree.nodes()] == [(n.id, n.state) for n in other]
        # the same states and values (to float32 rounding: a row's logits can change in the last bits
        # with the rows it shares a forward with)
        assert [n.value or 0.0 for n in result.tree.nodes()] == pytest.approx([n.value or 0.0 for n in other], rel=1e-5)
        rated += sum("verdict_probs" in n.info for n in result.tree.nodes())
    assert rated >= 6  # most thoughts ended at a stop byte and were rated from logits
