"""The settings of a task run: the command's options, the executor's settings they give, the
search config's settings, and the checks on them that run before any model loads."""

from __future__ import annotations

from dataclasses import dataclass, replace

from seed_tot.config import DecodeConfig, parse_k_config
from seed_tot.errors import ConfigError


@dataclass
class TaskRunOptions:
    target: str
    draft: str
    tiny: bool
    device: str
    dtype: str
    threads: int | None
    method: str
    k_config: str | None
    k: int | None
    workers: int | None
    search: str | None  # None: the task's default_search (bfs where the task names none)
    n_thoughts: int
    breadth: int
    depth: int | None
    iterations: int
    exploration_weight: float
    output_strategy: str
    temperature: float
    top_p: float
    max_new_tokens: int | None  # None: the task's thought budget (256 unless the task says more)
    value_max_new_tokens: int
    value_samples: int
    value_temperature: float
    cot: bool
    vote: bool
    cot_samples: int
    seed: int
    data_path: str | None
    limit: int | None
    start: int
    ids: str | None
    out_dir: str | None
    resume: bool
    concurrency: int | None = None  # None: default_concurrency(method)
    batching: str = "continuous"
    method_options: tuple[str, ...] = ()
    draft_dtype: str = "auto"
    value_mode: str | None = None  # None: the task's default_value_mode where the method can score, else samples
    value_model: str | None = None  # value mode learned: the head file (None: the one shipped for the target)
    known_states: bool = True
    server_url: str | None = None
    server_api: str = "auto"
    server_parallel: int | None = None
    server_timeout: float = 600.0
    with_draft: bool = False
    ray_address: str | None = None  # None: run here; "": Ray's default cluster; else a Ray address
    ray_actors: int | None = None  # None: one per machine (seed_tot.distributed.ray_pool.plan_actors)
    vote_weight: str = "leaf"
    thought_mode: str | None = None  # None: the task's default_thought_mode where the method can score, else sample
    backtrack: bool = True
    max_memory: str | None = None  # None: default_budget() (half the machine's RAM)


def executor_options(opts: TaskRunOptions) -> dict:
    """Method settings for make_executor, validated before any model loads."""
    from seed_tot.scheduling.factory import NEEDS_DRAFT, check_options

    options: dict = {}
    if opts.k_config is not None and opts.k is not None:
        raise ConfigError("Give either --k or --k-config, not both: --k 4 means --k-config 1,1,1,1.")
    if opts.k_config is not None:
        options["k_config"] = parse_k_config(opts.k_config)
    if opts.k is not None:
        if opts.k < 1:
            raise ConfigError(f"Bad --k {opts.k}: give a positive number of draft tokens.")
        options["k"] = opts.k
    if options and opts.method not in NEEDS_DRAFT | {"batched-lookup"}:
        raise ConfigError(f"--k/--k-config apply to speculative methods, not to --method {opts.method}.")
    if opts.with_draft and opts.method != "llama-cpp":
        raise ConfigError(f"--with-draft applies to --method llama-cpp, not to --method {opts.method}.")
    if opts.server_url and opts.method != "server":
        raise ConfigError(f"--server-url applies to --method server, not to --method {opts.method}.")
    if opts.method.startswith("seed"):
        options["num_workers"] = opts.workers or opts.n_thoughts
    elif opts.workers is not None:
        raise ConfigError(f"--workers applies to --method seed or seed-mcsd, not to --method {opts.method}.")
    for item in opts.method_options:
        name, value = parse_method_option(item)
        if name in options:
            raise ConfigError(f"--method-option {name} is given twice (or also by --k, --k-config or --workers): keep one.")
        options[name] = value
    check_options(opts.method, options)
    return options


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


DEFAULT_THOUGHT_TOKENS = 256


def search_settings(opts: TaskRunOptions, task=None) -> dict:
    """The search config's settings from the options (`task` supplies the default thought budget)."""
    thought_tokens = opts.max_new_tokens or (task.thought_tokens if task is not None else DEFAULT_THOUGHT_TOKENS)
    settings = {
        "n_thoughts": opts.n_thoughts,
        "depth": opts.depth,
        "seed": opts.seed,
        "thought_decode": DecodeConfig(
            max_new_tokens=thought_tokens, temperature=opts.temperature, top_p=opts.top_p
        ),
        "value_decode": DecodeConfig(
            max_new_tokens=opts.value_max_new_tokens, temperature=opts.value_temperature, top_p=opts.top_p
        ),
        "value_samples": opts.value_samples,
        "value_mode": opts.value_mode,
        "known_states": opts.known_states,
        "thought_mode": opts.thought_mode,
        "cot_candidate": opts.cot,
        "cot_samples": opts.cot_samples,
        "vote": opts.vote,
        "vote_weight": opts.vote_weight,
    }
    if opts.search == "bfs":
        settings["breadth"] = opts.breadth
        settings["backtrack"] = opts.backtrack
    elif opts.search == "mcts":
        settings.update(
            iterations=opts.iterations,
            exploration_weight=opts.exploration_weight,
            output_strategy=opts.output_strategy,
        )
    return settings


def _check_numbers(opts: TaskRunOptions) -> None:
    for name, value in [("--thoughts", opts.n_thoughts), ("--breadth", opts.breadth), ("--iterations", opts.iterations),
                        ("--max-new-tokens", opts.max_new_tokens or 1), ("--value-max-new-tokens", opts.value_max_new_tokens),
                        ("--value-samples", opts.value_samples), ("--concurrency", opts.concurrency)]:
        if value < 1:
            raise ConfigError(f"{name} must be at least 1 (got {value}).")
    if opts.depth is not None and opts.depth < 1:
        raise ConfigError(f"--depth must be at least 1 (got {opts.depth}).")
    if opts.cot_samples < 0:
        raise ConfigError(f"--cot-samples must be 0 (none) or more (got {opts.cot_samples}).")
    if opts.limit is not None and opts.limit < 1:
        raise ConfigError(f"--limit must be at least 1 (got {opts.limit}).")
    for name, value in [("--temperature", opts.temperature), ("--value-temperature", opts.value_temperature)]:
        if value < 0:
            raise ConfigError(f"{name} must be 0 (greedy) or positive (got {value}).")
    if not 0 < opts.top_p <= 1:
        raise ConfigError(f"--top-p must be in (0, 1] (got {opts.top_p}).")
    sampled = [name for name, value in [("--temperature", opts.temperature), ("--value-temperature", opts.value_temperature)] if value > 0]
    if opts.method == "fastcot" and sampled:
        raise ConfigError(
            f"--method fastcot decodes greedily only (it is approximate by design): add "
            f"{' '.join(f'{name} 0' for name in sampled)}, or use --method lookahead or jacobi, which also sample."
        )


def target_name(opts: TaskRunOptions) -> str:
    return "tiny-target" if opts.tiny else opts.target


def with_task_defaults(opts: TaskRunOptions, task) -> TaskRunOptions:
    """The task's own search, thought mode and value mode where the command gave none (the modes
    that read log-probabilities only where the method can score; a task may name another search for
    methods that cannot)."""
    from seed_tot.scheduling.factory import can_score

    scores = can_score(opts.method)
    search = task.default_search
    if not scores:
        search = task.default_search_unscored or search
    return replace(
        opts,
        search=opts.search or search,
        thought_mode=opts.thought_mode or (task.default_thought_mode if scores else "sample"),
        value_mode=opts.value_mode or (task.default_value_mode if scores else "samples"),
    )
