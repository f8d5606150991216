"""`seed-tot gsm8k | creative-writing | blocksworld`: run a tree search over a task's problems."""

from __future__ import annotations

import click

from seed_tot.cli.options import (
    config_options,
    data_options,
    decode_options,
    method_options,
    model_options,
    ray_options,
    search_options,
)


def _run_command(task_name: str, print_config: bool, **options) -> None:
    from seed_tot.cli import task_run
    from seed_tot.cli.run_config import RunConfig

    config = RunConfig(**options)
    if print_config:
        return task_run.print_config(task_name, config)
    if config.on_ray:
        from seed_tot.cli.ray_run import run_task_on_ray

        return run_task_on_ray(task_name, config)
    task_run.run_task(task_name, config)


def _task_command(task_name: str, command_name: str, doc: str):
    @click.command(command_name, help=doc)
    @model_options
    @method_options
    @search_options
    @decode_options
    @data_options
    @ray_options
    @config_options
    def command(print_config, **options):
        _run_command(task_name, print_config, **options)

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
