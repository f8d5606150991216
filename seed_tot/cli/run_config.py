"""The run configuration: every setting of a task run, resolved once into one frozen object that
everything downstream reads.

RunConfig holds the task commands' options under their own names: what `--print-config` prints
and `--config FILE` reads back. A command builds one from what it was given; `resolve_config`
decides what was left to a default (the method `auto`, the concurrency, the task's search,
thought mode and value mode) and `check_config` refuses settings that cannot run together, both
before any model loads. The machine-dependent memory plan is made later, from the loaded models.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from seed_tot.config import DecodeConfig, draft_shape, parse_k_config
from seed_tot.errors import ConfigError
from seed_tot.scheduling.methods import (
    AUTO,
    DEFAULT_METHOD,
    IN_PROCESS_DEFAULT_METHOD,
    Method,
    checked_settings,
    method_named,
    names_where,
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


def check_learned_judge(config: RunConfig) -> None:
    """--value-mode learned reads the target's hidden states in this process (beside an engine it
    loads the target's lower layers itself), which Ray actors do not return; --value-model needs it."""
    if config.value_mode == "learned" and config.on_ray:
        raise ConfigError("--value-mode learned reads the target's hidden states in this process, which --ray's "
                          "actors do not send back: drop --ray, or use --value-mode logits.")
    if config.value_model is not None and config.value_mode != "learned":
        raise ConfigError("--value-model applies to --value-mode learned: add it, or drop --value-model.")
    if config.value_mode == "learned" and config.int8:
        raise ConfigError("--value-mode learned reads the 16-bit target's hidden states, which --int8 changes: "
                          "drop --int8, or use --value-mode logits.")


def check_config(config: RunConfig, task) -> dict:
    """Refuse, in one sentence, settings of a resolved config that cannot run together; return the
    method's settings for make_executor."""
    check_numbers(config)
    settings = executor_settings(config)
    method = config.method_info
    if config.int8 and not method.in_process:
        raise ConfigError(f"--int8 rounds the in-process target's weights, and --method {config.method} decodes "
                          "elsewhere: drop --int8, or pick an in-process method such as batched-lookup.")
    if config.on_ray and not method.in_process:
        raise ConfigError(f"--ray runs the in-process methods, not --method {config.method}: pick e.g. --method "
                          "batched-lookup, or drop --ray and point --method server at your engine.")
    if config.value_mode == "logits":
        if not task.verdict_values:
            raise ConfigError(f"Task {task.name} has no verdict words to read from logits: use --value-mode samples.")
        if not method.can_score:
            raise ConfigError(_cannot_score(config.method, "--value-mode samples"))
    check_learned_judge(config)
    if config.value_mode == "learned":
        from seed_tot.values.judge import require_chain_prompt

        require_chain_prompt(task)
    if config.thought_mode == "choose" and not method.can_score:
        raise ConfigError(_cannot_score(config.method, "--thought-mode sample"))
    return settings


def _cannot_score(method: str, fix: str) -> str:
    return (f"--method {method} cannot read next-token log-probabilities: use {fix}, "
            "or a method such as batched-lookup, batched or ar.")


def executor_settings(config: RunConfig) -> dict:
    """The method's settings for make_executor from --k, --k-config, --workers and --method-option,
    checked before any model loads."""
    method = config.method_info
    draft_shape(config.k, config.k_config, None)  # both given, or a bad one, is refused here
    settings: dict = {}
    if config.k_config is not None:
        settings["k_config"] = parse_k_config(config.k_config)
    if config.k is not None:
        settings["k"] = config.k
    if settings and method.k_config is None:
        raise ConfigError(f"--k/--k-config apply to speculative methods, not to --method {config.method}.")
    if config.with_draft and not method.optional_draft:
        raise ConfigError(f"--with-draft applies to --method {_either(lambda m: m.optional_draft)}, "
                          f"not to --method {config.method}.")
    if config.server_url and not method.connects:
        raise ConfigError(f"--server-url applies to --method {_either(lambda m: m.connects)}, "
                          f"not to --method {config.method}.")
    if method.draft_workers:
        settings["num_workers"] = config.workers or config.n_thoughts
    elif config.workers is not None:
        raise ConfigError(f"--workers applies to --method {_either(lambda m: m.draft_workers)}, "
                          f"not to --method {config.method}.")
    for item in config.method_options:
        name, value = parse_method_option(item)
        if name in settings:
            raise ConfigError(f"--method-option {name} is given twice (or also by --k, --k-config or --workers): keep one.")
        settings[name] = value
    checked_settings(method, settings)
    return settings


def _either(test) -> str:
    return " or ".join(names_where(test))


def parse_method_option(item: str) -> tuple[str, object]:
    """"batched_verify=true" -> ("batched_verify", True) (also yes/no, on/off); numbers become int or float."""
    name, sep, text = (part.strip() for part in item.partition("="))
    if not sep or not name or not text:
        raise ConfigError(f"Bad --method-option {item!r}: write NAME=VALUE, e.g. --method-option batched_verify=true.")
    if text.lower() in ("true", "false", "yes", "no", "on", "off"):
        return name, text.lower() in ("true", "yes", "on")
    for kind in (int, float):
        try:
            return name, kind(text)
        except ValueError:
            pass
    return name, text


def check_numbers(config: RunConfig) -> None:
    for name, value in [("--thoughts", config.n_thoughts), ("--breadth", config.breadth),
                        ("--iterations", config.iterations), ("--max-new-tokens", config.max_new_tokens or 1),
                        ("--cot-max-new-tokens", config.cot_max_new_tokens),
                        ("--value-max-new-tokens", config.value_max_new_tokens),
                        ("--value-samples", config.value_samples), ("--concurrency", config.concurrency)]:
        if value < 1:
            raise ConfigError(f"{name} must be at least 1 (got {value}).")
    if config.depth is not None and config.depth < 1:
        raise ConfigError(f"--depth must be at least 1 (got {config.depth}).")
    if config.cot_samples < 0:
        raise ConfigError(f"--cot-samples must be 0 (none) or more (got {config.cot_samples}).")
    if (config.escalate or 0) < 0:
        raise ConfigError(f"--escalate must be 0 (never) or more (got {config.escalate}).")
    if not 0 <= config.escalate_below <= 1:
        raise ConfigError(f"--escalate-below is a share of the votes, between 0 and 1 (got {config.escalate_below}).")
    if config.limit is not None and config.limit < 1:
        raise ConfigError(f"--limit must be at least 1 (got {config.limit}).")
    temperatures = [("--temperature", config.temperature), ("--value-temperature", config.value_temperature)]
    for name, value in temperatures:
        if value < 0:
            raise ConfigError(f"{name} must be 0 (greedy) or positive (got {value}).")
    if not 0 < config.top_p <= 1:
        raise ConfigError(f"--top-p must be in (0, 1] (got {config.top_p}).")
    sampled = [name for name, value in temperatures if value > 0]
    if config.method_info.greedy_only and sampled:
        raise ConfigError(
            f"--method {config.method} decodes greedily only (it is approximate by design): add "
            f"{' '.join(f'{name} 0' for name in sampled)}, or use --method lookahead or jacobi, which also sample."
        )


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
