"""Thought mode "line" (seed_tot/reasoning/chain_lines.py): a state is a partial chain of thought,
a thought its next line; with a judge, BFS keeps the best partial chains (a value-guided beam)."""

import pytest
from search_helpers import FORMATTER, PROBLEM, TOKENIZER, make_task, tiny_config
from test_value_learned import LengthJudge

from seed_tot.config import DecodeConfig
from seed_tot.decoding.token_sink import TokenSink, stop_rule
from seed_tot.errors import ConfigError
from seed_tot.reasoning.chain_lines import LINE_DEPTH, line_thought
from seed_tot.reasoning.simple_task import SimpleTask
from seed_tot.requests import GenerationRequest, GenerationResult, GenerationStats
from seed_tot.search import BFS, BFSConfig
from seed_tot.search.base import step_limit

REPLY_START = "SOLVE step by step: What is 6 * 7?"


class ChainTask(SimpleTask):
    def cot_prompt(self, problem):
        return f"SOLVE step by step: {problem.question}"


def chain_task() -> ChainTask:
    base = make_task()
    return ChainTask(thought_template=base.thought_template, value_template=base.value_template,
                     answer_pattern=r"ANSWER: *(\S+)")


class LineExecutor:
    """Writes chains line by line: the reply so far (after the prompt) decides the next line. Seed
    parity picks a short or a long line; the fourth line gives the answer and ends the reply (EOS)."""

    name = "lines"

    def __init__(self):
        self.replies_so_far: list[str] = []

    def run(self, requests: list[GenerationRequest]) -> list[GenerationResult]:
        results = []
        for request in requests:
            prompt = TOKENIZER.decode(request.prompt_ids)
            so_far = prompt.split(REPLY_START, 1)[1]
            self.replies_so_far.append(so_far)
            done = len([line for line in so_far.split("\n") if line.strip()])
            if done == 3:
                text, finish = "\nSo ANSWER: 42", "eos"
            else:
                words = "short" if request.seed % 2 else "a much longer line"
                text, finish = ("\n" if done else "") + f"line {done + 1} {words}\n", "stop"
            ids = TOKENIZER.encode(text, add_special_tokens=False)
            results.append(GenerationResult(request.request_id, ids, text, finish, GenerationStats(new_tokens=len(ids))))
        return results

    def close(self) -> None:
        pass


def line_config(**extra) -> BFSConfig:
    return tiny_config(BFSConfig, thought_mode="line", depth=6, value_mode="learned", cot_candidate=False,
                       breadth=1, **extra)


def test_stop_strings_after_text_skip_the_reply_s_leading_line_breaks():
    letters = {1: "a", 2: "\n", 3: " "}
    config = DecodeConfig(max_new_tokens=10, stop=("\n",), stop_after_text=True)
    sink = TokenSink(stop_rule(config, frozenset({0}), lambda ids: "".join(letters[i] for i in ids)))
    assert sink.extend([2, 3, 2, 1, 1, 2, 1])
    assert (sink.token_ids, sink.finish_reason) == ([2, 3, 2, 1, 1, 2], "stop")
    assert config.server_stops == [] and DecodeConfig(stop=("\n",)).server_stops == ["\n"]


def test_a_line_extends_the_state_as_written_and_eos_completes_the_chain():
    stop = GenerationResult("r", [], "\n  x = 3 + 4:\n", "stop", GenerationStats())
    thought = line_thought("We add.\n", stop, seed=5)
    assert (thought.text, thought.state, thought.terminal) == ("x = 3 + 4:", "We add.\n\n  x = 3 + 4:\n", False)
    first = line_thought("", GenerationResult("r", [], "  We add.\n", "stop", GenerationStats()), seed=5)
    assert first.state == "We add.\n"
    end = line_thought("x = 7\n", GenerationResult("r", [], "ANSWER: 7", "eos", GenerationStats()), seed=5)
    assert end.terminal and end.state == "x = 7\nANSWER: 7"


def test_the_beam_continues_the_chain_prompt_and_keeps_the_best_partial_chain_per_line():
    executor = LineExecutor()
    result = BFS(chain_task(), executor, FORMATTER, line_config(), judge=LengthJudge()).run(PROBLEM)
    chosen = result.chosen
    # the judge prefers longer states, so every kept line is the long one
    assert chosen.state == ("line 1 a much longer line\n\nline 2 a much longer line\n\n"
                            "line 3 a much longer line\n\nSo ANSWER: 42")
    assert chosen.kind == "answer" and chosen.depth == 4 and result.answer == "42" and result.correct
    # each request continued a kept partial chain (after the plain-text prompt's line break)
    kept = {node.state for node in result.tree.nodes() if node.info.get("selected")}
    assert {s.removeprefix("\n") for s in executor.replies_so_far} == kept - {chosen.state} | {""}
    assert all(s.endswith("\n") for s in kept - {chosen.state})
    thoughts = [b for b in result.batches if b.role == "thought"]
    assert len(thoughts) == 4 and all(b.size == 2 for b in thoughts)


def test_line_mode_defaults_to_a_line_budget_and_needs_a_chain_prompt():
    assert step_limit(chain_task(), tiny_config(BFSConfig, thought_mode="line", depth=None)) == LINE_DEPTH
    assert step_limit(chain_task(), tiny_config(BFSConfig, depth=None)) == chain_task().default_depth
    with pytest.raises(ConfigError, match="chain-of-thought prompt"):
        BFS(make_task(), None, FORMATTER, tiny_config(BFSConfig, thought_mode="line"))
