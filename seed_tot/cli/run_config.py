"""The run configuration: every setting of a task run, resolved once into one frozen object that
everything downstream reads.

RunConfig holds the task commands' options under their own names: what `--print-config` prints
and `--config FILE` reads back. A command builds one from what it was given; `resolve_config`
decides what was left to a default (the method `auto`, the concurrency, the task's search,
thought mode and value mode) and `check_config` (seed_tot/cli/run_checks.py) refuses settings that
cannot run together, both before any model loads. The machine-dependent memory plan is made later, from the loaded models.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from seed_tot.config import DecodeConfig
from seed_tot.errors import ConfigError
from seed_tot.scheduling.methods import (
    AUTO,
    DEFAULT_METHOD,
    IN_PROCESS_DEFAULT_METHOD,
    Method,
    method_named,
    resolve_method,
)
from seed_tot.search.bfs import BFSConfig
from seed_tot.search.mcts import MCTSConfig
from seed_tot.search.settings import SearchConfig

# Where a run reads and writes, which problems it takes and the machine it runs on: the trace
# records the rest of the configuration, so runs of one configuration compare equal wherever they ran.
NOT_RECORDED = frozenset({"data_path", "limit", "start", "ids", "out_dir", "resume", "ray_address", "ray_actors",
                          "threads", "max_memory", "server_url"})

# The searches' own defaults: every search setting below takes its default from these, and the
# command options take theirs from RunConfig (seed_tot/cli/options.py), so a number lives in one place.
_SEARCH, _BFS, _MCTS = SearchConfig(), BFSConfig(), MCTSConfig()


class RunConfig(BaseModel):
    """A task run's settings, named as the task commands name their options (n_thoughts for
    --thoughts, data_path for --data, out_dir for --out, method_options for --method-option, the
    others as spelled). None means "the default"; resolve_config decides the ones that depend on
    the method or the task. Each field's default is the command option's default (the search
    settings' come from the search configs)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    # models
    target: str = "default-target"
    draft: str = "default-draft"
    tiny: bool = False
    device: str = "auto"
    dtype: str = "auto"
    draft_dtype: str = "auto"
    int8: bool = False  # the target's linear layers int8 (seed_tot/runtime/int8_linear.py)
    threads: int | None = None
    max_memory: str | None = None  # None: default_budget() (half the machine's RAM)
    # method
    method: str = DEFAULT_METHOD  # "auto" until resolved
    auto_choice: dict | None = None  # how "auto" was resolved: the measured paths (seed_tot/calibration) or the rule
    k_config: str | None = None
    k: int | None = None
    workers: int | None = None
    method_options: tuple[str, ...] = ()
    server_url: str | None = None
    server_api: str = "auto"
    server_parallel: int | None = None
    server_timeout: float = 600.0
    with_draft: bool = False
    # search
    search: str | None = None  # None: the task's default_search
    n_thoughts: int = _SEARCH.n_thoughts
    breadth: int = _BFS.breadth
    backtrack: bool = _BFS.backtrack
    depth: int | None = _SEARCH.depth  # None: the task's default_depth
    iterations: int = _MCTS.iterations
    exploration_weight: float = _MCTS.exploration_weight
    thought_mode: str | None = None  # None: the task's default where the method can score, else the search's
    known_states: bool = _SEARCH.known_states
    output_strategy: str = _MCTS.output_strategy
    # decoding and answers
    temperature: float = _SEARCH.thought_decode.temperature
    top_p: float = _SEARCH.thought_decode.top_p  # thoughts and evaluator replies alike
    max_new_tokens: int | None = None  # None: the task's thought budget
    cot_max_new_tokens: int = _SEARCH.cot_decode.max_new_tokens  # per chain of thought (SearchConfig.cot_decode)
    value_max_new_tokens: int = _SEARCH.value_decode.max_new_tokens
    value_samples: int = _SEARCH.value_samples
    value_mode: str | None = None  # None: the task's default where the method can score, else the search's
    value_model: str | None = None  # value mode learned: the head file (None: the one shipped for the target)
    value_temperature: float = _SEARCH.value_decode.temperature
    cot: bool = _SEARCH.cot_candidate
    cot_samples: int = _SEARCH.cot_samples
    escalate: int | None = None  # None: the task's default (JUDGED_SECOND_ROUND where the vote is judged by default, else 0)
    escalate_below: float = _SEARCH.escalate_below
    escalate_from: str = _SEARCH.escalate_from
    vote: bool = _SEARCH.vote
    stop_when_decided: bool = _SEARCH.stop_when_decided
    vote_weight: str | None = None  # None: "value" where the task's vote is judged by default, else "leaf"
    seed: int = _SEARCH.seed
    # data, output, scheduling
    data_path: str | None = None
    limit: int | None = None
    start: int = 0
    ids: str | None = None
    out_dir: str | None = None
    resume: bool = False
    concurrency: int | None = None  # None: the method's default
    batching: str = "continuous"
    ray_address: str | None = None  # None: run here; "": Ray's default cluster; else a Ray address
    ray_actors: int | None = None  # None: one per machine (seed_tot.distributed.ray_pool.plan_actors)

    @property
    def method_info(self) -> Method:
        """The method's record (seed_tot/scheduling/methods.py)."""
        return method_named(self.method)

    @property
    def target_name(self) -> str:
        return "tiny-target" if self.tiny else self.target

    @property
    def draft_name(self) -> str:
        return "tiny-draft" if self.tiny else self.draft

    @property
    def on_ray(self) -> bool:
        return self.ray_address is not None

    def recorded(self) -> dict[str, Any]:
        """What a trace records of this configuration (all but NOT_RECORDED)."""
        return self.model_dump(mode="json", exclude=set(NOT_RECORDED))


def resolve_config(config: RunConfig, task=None, measure: bool = True) -> RunConfig:
    """`config` with every default that depends on the method or the task decided: the method
    (auto: by measurement where one applies, see resolve_auto), the concurrency and, given the
    task, its search, thought mode and value mode. `measure=False` never times a path: it reads a
    cached measurement, else falls back to the CPU-flags rule."""
    if config.method == AUTO:
        config = resolve_auto(config, measure)
    method = resolve_method(config.method, config.target, config.tiny, config.device, on_ray=config.on_ray)
    concurrency = method_named(method).concurrency if config.concurrency is None else config.concurrency
    config = config.model_copy(update={"method": method, "concurrency": concurrency})
    return config if task is None else with_task_defaults(config, task)


def measured_auto_applies(config: RunConfig) -> bool:
    """"auto" is decided by timing the paths on a CPU run of a real target in this process; a GPU
    run, the tiny test models and Ray actors keep the rule."""
    if config.tiny or config.on_ray or config.device not in ("auto", "cpu"):
        return False
    if config.device == "auto":
        import torch

        return not torch.cuda.is_available()
    return True


def probe_width(config: RunConfig) -> int:
    """About how many rows the run decodes at once: problems at once x chains per problem."""
    from seed_tot.scheduling.methods import BATCHED_CONCURRENCY

    at_once = min(config.limit or BATCHED_CONCURRENCY, config.concurrency or BATCHED_CONCURRENCY)
    return max(1, at_once) * (1 + config.cot_samples)


def resolve_auto(config: RunConfig, measure: bool) -> RunConfig:
    """--method auto: the path the cached measurement of this target on this machine chose (timed
    now if none is cached and `measure`), its dtype too where --dtype is auto; else the rule."""
    if config.int8 and not config.on_ray:  # int8 rounds the in-process target: that names the path
        return config.model_copy(update={"method": IN_PROCESS_DEFAULT_METHOD, "auto_choice": {
            "by": "rule", "line": f"auto: {IN_PROCESS_DEFAULT_METHOD} (--int8 rounds the in-process target's layers)"}})
    if not measured_auto_applies(config):
        return config
    from seed_tot.calibration.choice import cached_calibration, calibrate, width_bucket

    width = width_bucket(probe_width(config))
    record = cached_calibration(config.target, width)
    if record is None and measure:
        import click

        click.echo(f"auto: timing each path for {config.target} at {width} rows on this machine, once "
                   "(seed-tot calibrate does it ahead; the result is cached) ...", err=True)
        record = calibrate(config.target, width, echo=lambda line: click.echo(line, err=True))
    if record is None:
        return config
    chosen = record.chosen
    dtype = chosen["dtype"] if config.dtype == "auto" and chosen["dtype"] is not None else config.dtype
    choice = {"by": "measurement", "line": record.line(), "width": record.width, "measured_at": record.measured_at,
              "machine": record.machine, "timings": record.timings, "chosen": chosen}
    return config.model_copy(update={"method": chosen["method"], "dtype": dtype, "auto_choice": choice})


JUDGED_SECOND_ROUND = 4  # more samples where the judged vote is unsure (measured in docs/judge.md)


def with_task_defaults(config: RunConfig, task) -> RunConfig:
    """The task's own search, thought mode and value mode where the command gave none (the modes
    that read log-probabilities only where the method can score; a task may name another search for
    methods that cannot). Elsewhere the search's own defaults. A task whose vote is judged by default
    gets, for self-consistency, the learned judge's value-weighted vote where judged_by_default
    allows it (the rule that chose it measured that vote, not a tree's), with a second round of
    JUDGED_SECOND_ROUND samples where that vote is unsure (docs/judge.md)."""
    scores = config.method_info.can_score
    search = task.default_search if scores else (task.default_search_unscored or task.default_search)
    thought_mode = task.default_thought_mode if scores else _SEARCH.thought_mode
    value_mode = task.default_value_mode if scores else _SEARCH.value_mode
    vote_weight, escalate = _SEARCH.vote_weight, _SEARCH.escalate_samples
    search = config.search or search
    if (search == "self-consistency" and config.value_mode is None and config.vote_weight is None
            and judged_by_default(config, task)):
        value_mode, vote_weight, escalate = "learned", "value", JUDGED_SECOND_ROUND
    return config.model_copy(update={"search": search,
                                     "thought_mode": config.thought_mode or thought_mode,
                                     "value_mode": config.value_mode or value_mode,
                                     "vote_weight": config.vote_weight or vote_weight,
                                     "escalate": escalate if config.escalate is None else config.escalate})


def judged_by_default(config: RunConfig, task) -> bool:
    """A task's vote is judged by default only where its judge costs no second model: a value head
    ships for the target (by name: --target default-target) and the target decodes in this process."""
    from seed_tot.values.judge import ships_head_for

    method = config.method_info
    return (task.judged_vote and task.cot_prompt is not None and method.in_process and not config.on_ray
            and not config.int8 and ships_head_for(config.target_name))


def search_settings(config: RunConfig, task) -> dict:
    """The search config's settings from the run config (`task` supplies the default thought budget)."""
    thought_tokens = config.max_new_tokens or task.thought_tokens
    settings = {
        "n_thoughts": config.n_thoughts,
        "depth": config.depth,
        "seed": config.seed,
        "thought_decode": _decode(_SEARCH.thought_decode, max_new_tokens=thought_tokens,
                                  temperature=config.temperature, top_p=config.top_p),
        "value_decode": _decode(_SEARCH.value_decode, max_new_tokens=config.value_max_new_tokens,
                                temperature=config.value_temperature, top_p=config.top_p),
        "cot_decode": _decode(_SEARCH.cot_decode, max_new_tokens=config.cot_max_new_tokens),
        "value_samples": config.value_samples,
        "value_mode": config.value_mode,
        "known_states": config.known_states,
        "thought_mode": config.thought_mode,
        "cot_candidate": config.cot,
        "cot_samples": config.cot_samples,
        "escalate_samples": config.escalate or 0,
        "escalate_below": config.escalate_below,
        "escalate_from": config.escalate_from,
        "vote": config.vote,
        "vote_weight": config.vote_weight,
        "stop_when_decided": config.stop_when_decided,
    }
    if config.search == "bfs":
        settings["breadth"] = config.breadth
        settings["backtrack"] = config.backtrack
    elif config.search == "mcts":
        settings.update(
            iterations=config.iterations,
            exploration_weight=config.exploration_weight,
            output_strategy=config.output_strategy,
        )
    return settings


def _decode(default: DecodeConfig, **update: Any) -> DecodeConfig:
    """The search's default decoding with the run's numbers in place (validated, as a new config)."""
    return DecodeConfig(**{**default.model_dump(), **update})


def read_config_file(path: str | Path, names: set[str]) -> dict[str, Any]:
    """The settings of a file written by --print-config (JSON); a key that names no option of the
    command, or a file that is not such an object, is refused in one sentence."""
    try:
        values = json.loads(Path(path).read_text())
    except OSError as exc:
        raise ConfigError(f"Cannot read --config {path} ({exc.strerror}): check the path.") from None
    except json.JSONDecodeError as exc:
        raise ConfigError(f"--config {path} is not JSON ({exc.msg}, line {exc.lineno}): write it with "
                          "--print-config.") from None
    if not isinstance(values, dict):
        raise ConfigError(f"--config {path} must hold one JSON object of settings, as --print-config writes.")
    values.pop("auto_choice", None)  # how "auto" was resolved: a record of the run that wrote it, not a setting
    unknown = sorted(set(values) - names)
    if unknown:
        raise ConfigError(f"--config {path} has an unknown setting {unknown[0]!r}: the settings are the options' "
                          "names, as --print-config writes them.")
    return values
