"""The few calls a user needs to run a search: solve one problem, turn the result into a trace."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from seed_tot.errors import ConfigError
from seed_tot.observe.trace import describe_models, to_trace  # re-exported: seed_tot.api.to_trace is public
from seed_tot.reasoning.prompting import PromptFormatter
from seed_tot.requests import Executor
from seed_tot.search import Search, SearchConfig, SearchResult, search_class
from seed_tot.task import Problem, Task


def _tokenizer_of(source: Any):
    """A tokenizer, or the tokenizer of a ModelRunner-like object (its `.tokenizer`)."""
    return getattr(source, "tokenizer", source)


def solve(
    task: Task,
    problem: Problem,
    executor: Executor,
    tokenizer: Any,
    search: str | type[Search] = "bfs",
    config: SearchConfig | None = None,
    judge: Any = None,
    **options: Any,
) -> SearchResult:
    """Search one problem. `tokenizer` is the target's tokenizer or its ModelRunner; `search`
    is "bfs", "mcts" or a Search subclass; `options` build the search's config when `config`
    is not given (e.g. n_thoughts=3, breadth=2, depth=4, seed=0). With value_mode="learned",
    `judge` is a LearnedJudge (LearnedJudge.load(target, path))."""
    cls = search_class(search) if isinstance(search, str) else search
    if config is None:
        try:
            config = cls.config_class(**options)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(part) for part in first["loc"])
            raise ConfigError(
                f"Bad {cls.name} option {where}: {first['msg']} "
                f"(options: {', '.join(cls.config_class.model_fields)})."
            ) from None
    elif options:
        raise ConfigError("Pass either a config object or keyword options to solve(), not both.")
    return cls(task, executor, PromptFormatter(_tokenizer_of(tokenizer)), config, judge=judge).run(problem)
