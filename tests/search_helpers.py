"""Shared pieces of the search tests: a byte tokenizer, a SimpleTask and scripted replies."""

from __future__ import annotations

import re

from seed_tot.models.tiny import byte_tokenizer
from seed_tot.reasoning.prompting import PromptFormatter
from seed_tot.reasoning.simple_task import SimpleTask
from seed_tot.task import Problem

TOKENIZER = byte_tokenizer()
FORMATTER = PromptFormatter(TOKENIZER)
PROBLEM = Problem(id="p1", question="What is 6 * 7?", gold="42")


def make_task(depth: int = 3) -> SimpleTask:
    return SimpleTask(
        thought_template="THINK about {question}\nso far:\n{state}\nstep {step}:",
        value_template="RATE this state for {question}:\n{state}",
        answer_pattern=r"ANSWER: *(\S+)",
        default_depth=depth,
        fallback_value=-1.0,
    )


def idea_reply(prompt: str, request) -> str:
    """Thoughts name their seed; values are the last digit of the newest idea's seed."""
    if prompt.startswith("THINK"):
        return f" idea{request.seed % 1000} "
    ideas = re.findall(r"idea(\d+)", prompt)
    return f"{int(ideas[-1]) % 10} points"


def value_of(state: str) -> float:
    return float(int(re.findall(r"idea(\d+)", state)[-1]) % 10)


def tiny_config(config_class, **extra):
    """A small, fast search config for runs on the tiny random-weight pair."""
    from seed_tot.config import DecodeConfig

    settings = dict(
        n_thoughts=2,
        depth=2,
        thought_decode=DecodeConfig(max_new_tokens=8, temperature=1.0),
        value_decode=DecodeConfig(max_new_tokens=4),
        value_samples=1,
        cot_decode=DecodeConfig(max_new_tokens=8),
    )
    return config_class(**{**settings, **extra})
