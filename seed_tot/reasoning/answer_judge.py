"""A task's model judge of a final answer: the optional task hook `judge_prompt` / `judge_record`
(seed_tot/task.py), run greedily by the executor's target once a problem's search has ended."""

from __future__ import annotations

from seed_tot.config import DecodeConfig
from seed_tot.reasoning.prompting import PromptFormatter
from seed_tot.requests import Executor, GenerationRequest
from seed_tot.task import Task

JUDGE_DECODE = DecodeConfig(max_new_tokens=128, temperature=0.0)


def has_judge(task: Task) -> bool:
    return task.judge_prompt is not None and task.judge_record is not None


def judge_answer(task: Task, executor: Executor, formatter: PromptFormatter, answer: str, seed: int) -> dict:
    """The record fields the task's judge gives `answer`; {} for a task without a judge or no answer."""
    if not has_judge(task) or not answer:
        return {}
    request = GenerationRequest(
        prompt_ids=formatter.encode(task.judge_prompt(answer)), config=JUDGE_DECODE, seed=seed, request_id="judge"
    )
    reply = executor.run([request])[0]
    return task.judge_record(reply.text)
