"""The API's model ids, "<task>/<search>": every bundled task with every search that can run it
under the server's settings, and the search config a request builds from its entry."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from seed_tot.errors import ConfigError
from seed_tot.search import SEARCHES
from seed_tot.search.base import Search, SearchConfig

CLI_TASK_NAMES = {"gsm8k": "gsm8k", "creative_writing": "creative-writing", "blocksworld": "blocksworld"}


@dataclass(frozen=True)
class ModelEntry:
    """One model id: the task (by its get_task name), the search class, the server's default config."""

    model_id: str
    task_name: str
    search_cls: type[Search]
    config: SearchConfig
    default: bool  # the task's own default search


def build_catalog(config) -> dict[str, ModelEntry]:
    """Every (task, search) pair whose config the server's settings build and the search accepts.
    `config`: the server's RunConfig (search and mode fields None: each task's defaults)."""
    from seed_tot.cli.run_config import search_settings, with_task_defaults
    from seed_tot.values.judge import require_chain_prompt
    from seed_tot_tasks import TASK_NAMES, get_task

    entries: dict[str, ModelEntry] = {}
    for task_name in TASK_NAMES:
        task = get_task(task_name)
        default_search = with_task_defaults(config, task).search
        for search_name, cls in SEARCHES.items():
            # each search its task's defaults (GSM8K judges the vote of self-consistency only)
            search_config = with_task_defaults(config.model_copy(update={"search": search_name}), task)
            try:
                settings = cls.config_class(**search_settings(search_config, task))
                cls.check(task, settings)
                if settings.value_mode == "learned":
                    require_chain_prompt(task)
            except (ConfigError, ValueError):
                continue
            model_id = f"{CLI_TASK_NAMES.get(task_name, task_name)}/{search_name}"
            entries[model_id] = ModelEntry(model_id, task_name, cls, settings, search_name == default_search)
    return entries


class OptionError(ConfigError):
    """A request option out of range: `param` names it."""

    def __init__(self, message: str, param: str | None):
        super().__init__(message)
        self.param = param


# the request's own search settings (the `seed_tot` object of the body) and where they go
EXTENSION_FIELDS = {
    "n_thoughts": "n_thoughts", "depth": "depth", "breadth": "breadth", "iterations": "iterations",
    "value_samples": "value_samples", "cot_samples": "cot_samples", "exploration_weight": "exploration_weight",
    "escalate_samples": "escalate_samples", "escalate_below": "escalate_below",
}


def extension_names(entry: ModelEntry) -> list[str]:
    """The `seed_tot` settings a request to `entry` may give."""
    fields = entry.search_cls.config_class.model_fields
    return sorted(k for k, f in EXTENSION_FIELDS.items() if f in fields) + ["value_max_tokens"]


def request_config(entry: ModelEntry, *, seed: int, temperature: float | None, top_p: float | None,
                   max_tokens: int | None, extension: dict[str, Any]) -> SearchConfig:
    """The entry's config with the request's settings; OptionError names the option to change."""
    data = entry.config.model_dump()
    data["seed"] = seed
    thought = dict(data["thought_decode"])
    if temperature is not None:
        thought["temperature"] = temperature
    if top_p is not None:
        thought["top_p"] = top_p
    if max_tokens is not None:
        thought["max_new_tokens"] = max_tokens
        data["cot_decode"] = {**data["cot_decode"], "max_new_tokens": max_tokens}
    data["thought_decode"] = thought
    for key, value in extension.items():
        if key == "value_max_tokens":
            data["value_decode"] = {**data["value_decode"], "max_new_tokens": value}
            continue
        field = EXTENSION_FIELDS.get(key)
        if field is None or field not in entry.search_cls.config_class.model_fields:
            raise OptionError(f"Unknown seed_tot option {key!r} for {entry.model_id}: use "
                              f"{', '.join(extension_names(entry))}.", f"seed_tot.{key}")
        data[field] = value
    try:
        config = entry.search_cls.config_class(**data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        param = {"thought_decode.temperature": "temperature", "thought_decode.top_p": "top_p",
                 "thought_decode.max_new_tokens": "max_tokens", "cot_decode.max_new_tokens": "max_tokens",
                 "value_decode.max_new_tokens": "seed_tot.value_max_tokens"}.get(where, f"seed_tot.{where}")
        raise OptionError(f"Bad {param}: {first['msg']}.", param) from None
    try:
        entry.search_cls.check(_task(entry), config)
    except ConfigError as exc:
        raise OptionError(str(exc), None) from None
    return config


def _task(entry: ModelEntry):
    from seed_tot_tasks import get_task

    return get_task(entry.task_name)
