"""make_executor: one entry point from a method name to an Executor.

Which methods there are, what each takes and can do: seed_tot/scheduling/methods.py (one record
per method; docs/executors.md lists them). Builders are imported lazily, so a method's
dependencies load only when it is used.
"""

from __future__ import annotations

from seed_tot.errors import ConfigError
from seed_tot.requests import Executor
from seed_tot.runtime.runner import ModelRunner
from seed_tot.scheduling.builders import DraftArg
from seed_tot.scheduling.methods import checked_settings, method_named


def make_executor(method: str, target: ModelRunner, draft: DraftArg | None = None, **settings) -> Executor:
    """Build the executor for `method`; `settings` are the method's (its record lists them)."""
    record = method_named(method)
    if record.needs_draft and draft is None:
        raise ConfigError(f"Method {method!r} needs a draft model: pass a draft of the target's tokenizer family.")
    settings = checked_settings(record, settings)
    if record.engine:
        raise ConfigError(
            f"Method {method!r} runs on an inference server, not on a loaded model: use it from a task command "
            "(e.g. seed-tot gsm8k --method llama-cpp) or build it with seed_tot.engines.setup.open_llama_cpp or open_server."
        )
    return record.builder()(record, target, draft, settings)

