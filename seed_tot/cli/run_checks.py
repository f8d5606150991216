"""Settings of a resolved run configuration that cannot run together, refused in one sentence
before any model loads, and the method's own settings for make_executor."""

from __future__ import annotations

from seed_tot.cli.run_config import RunConfig
from seed_tot.config import draft_shape, parse_k_config
from seed_tot.errors import ConfigError
from seed_tot.scheduling.methods import checked_settings, names_where


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
