"""ExecutorSpec: the settings an executor is built from, small enough to send to another process
or machine, so that every Ray actor loads the same models and executor the CLI would load."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from seed_tot.models.loading import dtype_name
from seed_tot.requests import Executor
from seed_tot.runtime.runner import ModelRunner
from seed_tot.scheduling.seed.worker import NamedDraft


@dataclass(frozen=True)
class ExecutorSpec:
    """`method` and its `options` as for make_executor; models by name as for load_model."""

    method: str
    target: str = "default-target"
    draft: str = "default-draft"
    dtype: str = "auto"
    int8: bool = False  # the target's linear layers int8 (load_model's int8)
    device: str = "auto"
    draft_dtype: str = "auto"
    threads: int | None = None  # torch threads; None leaves torch's default
    options: dict[str, Any] = field(default_factory=dict)

    def load_models(self) -> tuple[ModelRunner, ModelRunner | NamedDraft | None]:
        """The target, and the draft when the method needs one (same tokenizer checked). A method
        whose draft runs in worker processes gets the draft by name: each worker loads its own copy,
        and one more in this process would only hold memory (the executor checks the tokenizers)."""
        from seed_tot.models.loading import check_pair, load_draft, load_model, resolve_draft_dtype
        from seed_tot.scheduling.methods import method_named

        if self.threads:
            torch.set_num_threads(self.threads)
        target = load_model(self.target, dtype=self.dtype, device=self.device, int8=self.int8)
        method = method_named(self.method)
        if not method.needs_draft:
            return target, None
        if method.draft_workers:
            dtype = resolve_draft_dtype(self.draft_dtype, target.dtype, target.device)
            return target, NamedDraft(self.draft, dtype=dtype_name(dtype), device=str(target.device))
        draft = load_draft(self.draft, target, self.draft_dtype)
        check_pair(draft, target)
        return target, draft

    def build(self) -> tuple[Executor, ModelRunner, ModelRunner | None]:
        """Load the models and build the executor: (executor, target, draft)."""
        from seed_tot.scheduling.factory import make_executor

        target, draft = self.load_models()
        return make_executor(self.method, target, draft, **self.options), target, draft


def model_names(target: ModelRunner, draft: ModelRunner | NamedDraft | None) -> dict[str, str]:
    """The models a trace records: names, and the draft's dtype when there is a draft."""
    models = {"target": target.name}
    if draft is not None:
        draft_dtype = draft.dtype if isinstance(draft, NamedDraft) else dtype_name(draft.dtype)
        models.update(draft=draft.name, draft_dtype=draft_dtype)
    return models


def trace_settings(method: str, target: ModelRunner, options: dict[str, Any]) -> dict[str, Any]:
    """The run settings a trace records beside the search config: method, resolved dtype, whether
    subnormals are flushed, method options."""
    int8 = {"int8_linear_layers": target.int8_layers} if target.int8_layers else {}
    return {"method": method, "dtype": dtype_name(target.dtype), "flush_subnormals": target.flushes_subnormals, **int8,
            **{k: list(v) if isinstance(v, tuple) else v for k, v in options.items()}}
