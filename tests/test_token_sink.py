"""The token sink every decoder and executor feeds (seed_tot/decoding/token_sink.py): where it
cuts and which finish reason it gives, for tokens appended one at a time or several at once."""

import pytest

from seed_tot.config import DecodeConfig
from seed_tot.decoding.token_sink import StopCriteria, TokenSink, stop_rule

EOS = 0
LETTERS = {1: "a", 2: "b", 3: "c", 4: "\n", 5: "##"}


def decode(ids: list[int]) -> str:
    return "".join(LETTERS.get(i, "") for i in ids)


def sink(max_new_tokens: int = 10, stop: tuple[str, ...] = (), ignore_eos: bool = False) -> TokenSink:
    config = DecodeConfig(max_new_tokens=max_new_tokens, stop=list(stop), ignore_eos=ignore_eos)
    return TokenSink(stop_rule(config, frozenset({EOS}), decode))


def fed_one_by_one(tokens: list[int], **rule) -> TokenSink:
    s = sink(**rule)
    for token in tokens:
        if s.extend([token]):
            break
    return s


@pytest.mark.parametrize("split", [1, 2, 3, 7])
def test_a_stop_string_spanning_token_boundaries_cuts_after_the_completing_token(split):
    tokens = [3, 1, 2, 1, 2, 3, 3]  # "cababcc": "abab" completes at the 5th token
    s = sink(stop=("abab",))
    for start in range(0, len(tokens), split):
        if s.extend(tokens[start : start + split]):
            break
    assert (s.token_ids, s.finish_reason) == ([3, 1, 2, 1, 2], "stop")
    assert (s.token_ids, s.finish_reason) == (fed_one_by_one(tokens, stop=("abab",)).token_ids, "stop")


def test_a_stop_string_made_of_one_multi_character_token():
    s = sink(stop=("#",))
    assert s.extend([1, 5, 2]) and (s.token_ids, s.finish_reason) == ([1, 5], "stop")


def test_max_new_tokens_cuts_a_longer_step_and_says_length():
    s = sink(max_new_tokens=3)
    assert not s.extend([1, 2]) and s.remaining == 1 and not s.finished
    assert s.extend([3, 1, 2]) and (s.token_ids, s.finish_reason, s.remaining) == ([1, 2, 3], "length", 0)


def test_eos_ends_with_the_eos_token_kept():
    s = sink()
    assert s.extend([1, EOS, 2]) and (s.token_ids, s.finish_reason) == ([1, EOS], "eos")


def test_ignore_eos_reads_eos_as_an_ordinary_token():
    s = sink(max_new_tokens=4, ignore_eos=True)
    assert not s.extend([1, EOS, 2])
    assert s.extend([EOS, 3]) and (s.token_ids, s.finish_reason) == ([1, EOS, 2, EOS], "length")


def test_the_first_stop_wins_eos_before_a_stop_string_and_the_budget():
    assert (fed_one_by_one([1, EOS, 2, 1], stop=("ab",)).finish_reason) == "eos"
    # a stop string completed by the budget's last token is a stop, as autoregressive decoding says
    s = sink(max_new_tokens=2, stop=("ab",))
    assert s.extend([1, 2]) and s.finish_reason == "stop"


def test_appending_after_the_end_is_refused():
    s = sink(max_new_tokens=1)
    assert s.extend([1])
    with pytest.raises(ValueError, match="after the generation ended"):
        s.extend([2])


def test_of_reads_the_models_eos_and_decode():
    class Model:
        eos_token_ids = frozenset({7})

        def decode(self, ids):
            return decode(ids)

    s = TokenSink.of(Model(), DecodeConfig(max_new_tokens=5, stop=["c"]))
    assert s.stop == StopCriteria(5, frozenset({7}), ("c",), s.stop.decode)
    assert s.extend([1, 7, 3]) and s.finish_reason == "eos"
    assert TokenSink.of(Model(), DecodeConfig(max_new_tokens=5, ignore_eos=True)).stop.eos_token_ids == frozenset()
