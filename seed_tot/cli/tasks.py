"""`seed-tot gsm8k | creative-writing | blocksworld`: run a tree search over a task's problems."""

from __future__ import annotations

import click

from seed_tot.cli.options import (
    data_options,
    decode_options,
    method_options,
    model_options,
    ray_options,
    search_options,
)


def _run_command(task_name: str, **options) -> None:
    from seed_tot.cli.task_run import TaskRunOptions, run_task

    if options.get("ray_address") is not None:
        from seed_tot.cli.ray_run import run_task_on_ray

        return run_task_on_ray(task_name, TaskRunOptions(**options))
    run_task(task_name, TaskRunOptions(**options))


def _task_command(task_name: str, command_name: str, doc: str):
    @click.command(command_name, help=doc)
    @model_options
    @method_options
    @search_options
    @decode_options
    @data_options
    @ray_options
    def command(**options):
        _run_command(task_name, **options)

    return command


gsm8k = _task_command(
    "gsm8k",
    "gsm8k",
    "Grade-school math (GSM8K test split): sub-question/sub-answer thoughts, sure/likely/impossible "
    "verdicts on each step, answer by vote with a greedy CoT candidate; accuracy against the '#### N' gold "
    "answer. Paper default depth 4.",
)
creative_writing = _task_command(
    "creative_writing",
    "creative-writing",
    "ToT Creative Writing: a plan, then a 4-paragraph passage whose paragraphs end with the 4 given "
    "sentences; scores: constraint fraction and a 1-10 coherency judge (the target). Paper default depth 2.",
)
blocksworld = _task_command(
    "blocksworld",
    "blocksworld",
    "Blocksworld (PlanBench, 6-step set): one action per step, good/bad values, success = the simulated "
    "plan is valid and reaches the goal. Paper default depth 7.",
)
