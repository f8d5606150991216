"""JSON trace of one search: the whole tree, the chosen path, the answer and the run metrics.

The schema is versioned (`schema_version`) and documented in docs/api.md. Files are written
atomically (temporary file in the same directory, then os.replace), so a crash never leaves a
half-written trace. `tree_from_trace` rebuilds the ReasoningTree from a loaded trace.
"""

from __future__ import annotations

import copy
import gzip
import json
import os
import zlib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from seed_tot.errors import SeedTotError
from seed_tot.metrics import BatchRecord, RunMetrics
from seed_tot.records import read_stored_text, stored_file, write_text_atomically
from seed_tot.requests import Executor, GenerationStats
from seed_tot.search.base import SearchResult
from seed_tot.task import Task
from seed_tot.tree import NodeKind, ReasoningTree, ThoughtNode

TRACE_SCHEMA_VERSION = 1


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid")


class CountersRecord(_Record):
    """seed_tot.requests.DecodeCounters: what decoding did."""

    new_tokens: int = 0
    draft_tokens_proposed: int = 0
    draft_tokens_accepted: int = 0
    target_forwards: int = 0
    draft_forwards: int = 0


class StatsRecord(CountersRecord):
    """Counters of one request (or of the requests of one batch)."""

    wall_seconds: float = 0.0
    cached_prompt_tokens: int = 0  # reused from an inference server's prompt cache (0 in older traces)

    @classmethod
    def of(cls, stats: GenerationStats | None) -> "StatsRecord | None":
        if stats is None:
            return None
        return cls(**{name: getattr(stats, name) for name in cls.model_fields})

    def to_stats(self) -> GenerationStats:
        return GenerationStats(**self.model_dump())


class NodeRecord(_Record):
    id: int
    parent: int | None
    depth: int
    kind: NodeKind
    state: str
    thought: str
    value: float | None
    value_parsed: bool | None  # False: the evaluator reply was unparseable, value is the fallback
    raw_values: list[str]
    generation: StatsRecord | None  # the thought request that created the node
    evaluation: StatsRecord | None  # the value request that rated it
    seeds: dict[str, int]
    info: dict[str, Any]  # search-specific: BFS step/selected, MCTS visits/return_sum, finish_reason

    # A record holds a ThoughtNode's fields under the same names; only the stats change type.
    @classmethod
    def of(cls, node: ThoughtNode) -> "NodeRecord":
        stats = {"generation": StatsRecord.of(node.generation), "evaluation": StatsRecord.of(node.evaluation)}
        return cls(**_shallow_copies(node, cls.model_fields) | stats)

    def to_node(self) -> ThoughtNode:
        stats = {name: record.to_stats() if record else None
                 for name, record in (("generation", self.generation), ("evaluation", self.evaluation))}
        return ThoughtNode(**_shallow_copies(self, type(self).model_fields) | stats)


def _shallow_copies(source: Any, names) -> dict[str, Any]:
    """source's attributes `names`, lists and dicts copied (the copy must not share them)."""
    return {name: copy.copy(getattr(source, name)) for name in names}


class EdgeRecord(_Record):
    source: int
    target: int


class BatchTraceRecord(_Record):
    """One executor call, in the order the search made them."""

    role: Literal["thought", "value", "cot"]
    node_id: int
    size: int
    wall_seconds: float  # of the whole executor call (shared by every problem in a merged call)
    stats: StatsRecord
    events: list[dict[str, Any]] | None  # the executor's scheduler events, when it exposes them
    merged_size: int = 0  # requests in that executor call, all problems together (0: not recorded)


class MetricsRecord(_Record):
    problems: int
    new_tokens: int
    wall_seconds: float  # seconds spent inside executor calls
    tokens_per_second: float | None
    requests: int
    batches: int
    acceptance_rate: float | None
    draft_tokens_proposed: int
    draft_tokens_accepted: int
    target_forwards: int
    draft_forwards: int
    parse_failures: int
    evaluations: int
    cached_prompt_tokens: int = 0  # absent from traces written before it was recorded

    @classmethod
    def of(cls, metrics: RunMetrics) -> "MetricsRecord":
        return cls(**metrics.as_dict())

    def to_metrics(self) -> RunMetrics:
        data = self.model_dump(exclude={"tokens_per_second", "acceptance_rate"})
        return RunMetrics(**data)


class Trace(_Record):
    schema_version: Literal[1] = TRACE_SCHEMA_VERSION
    task: str
    search: str
    executor: str
    problem_id: str
    question: str
    config: dict[str, Any]
    models: dict[str, str]
    nodes: list[NodeRecord]
    edges: list[EdgeRecord]
    chosen_path: list[int]
    final_answer: str | None
    gold: Any
    score: float | None
    correct: bool | None
    metrics: MetricsRecord
    batches: list[BatchTraceRecord]
    # How the answer was chosen: "vote" (counts per answer, the CoT candidate's answer), "search", or
    # "goal" (the search's choice was shown at the goal by the task, so no vote).
    selection: dict[str, Any] | None = None
    # The problem's task data beyond question and gold (e.g. Blocksworld's PDDL), so a report can
    # score the trace without the data file; and which data file the run read (path, sha256).
    problem_meta: dict[str, Any] | None = None
    data_file: dict[str, str] | None = None


def _batch_record(batch: BatchRecord) -> BatchTraceRecord:
    return BatchTraceRecord(
        role=batch.role,
        node_id=batch.node_id,
        size=batch.size,
        wall_seconds=batch.wall_seconds,
        stats=StatsRecord.of(batch.stats),
        events=batch.events,
        merged_size=batch.merged_size,
    )


def jsonable(value: Any) -> Any:
    """Gold answers are task-defined; keep them as JSON (tuples become lists, others text)."""
    return json.loads(json.dumps(value, default=str))


def describe_models(executor: Executor) -> dict[str, str]:
    """Model names an executor exposes as `target` / `draft` objects with a `name`."""
    models = {}
    for role in ("target", "draft"):
        name = getattr(getattr(executor, role, None), "name", None)
        if isinstance(name, str):
            models[role] = name
    return models


def to_trace(
    result: SearchResult,
    task: Task,
    executor: Executor,
    models: dict[str, str] | None = None,
    extra_config: dict[str, Any] | None = None,
    data_file: dict[str, str] | None = None,
) -> Trace:
    """The trace of `result`, named after the task and executor that produced it. `models`
    defaults to the executor's target / draft names; `extra_config` adds run settings (e.g.
    k_config); `data_file` names the data file the problem came from (path, sha256)."""
    if models is None:
        models = describe_models(executor)
    config = {"search": result.config.model_dump(mode="json"), **(extra_config or {})}
    return Trace(
        task=task.name,
        search=result.search,
        executor=getattr(executor, "name", type(executor).__name__),
        problem_id=result.problem.id,
        question=result.problem.question,
        config=jsonable(config),
        models=dict(models or {}),
        nodes=[NodeRecord.of(node) for node in result.tree.nodes()],
        edges=[EdgeRecord(source=s, target=t) for s, t in result.tree.edges()],
        chosen_path=list(result.chosen_path),
        final_answer=result.answer,
        gold=jsonable(result.problem.gold),
        score=result.score,
        correct=result.correct,
        metrics=MetricsRecord.of(result.metrics),
        batches=[_batch_record(batch) for batch in result.batches],
        selection=result.selection.as_dict() if result.selection is not None else None,
        problem_meta=jsonable(result.problem.meta),
        data_file=data_file,
    )


def write_trace(path: str | os.PathLike, trace: Trace) -> Path:
    """Write `trace` as indented JSON, atomically; return the path."""
    return write_text_atomically(path, trace.model_dump_json(indent=2))


def load_trace(path: str | os.PathLike) -> Trace:
    """Read a trace file, plain or gzip-compressed (`FILE.json.gz`, also found when `FILE.json` is
    asked for); refuse files of another schema version or that do not validate."""
    source = Path(path)
    try:
        data = json.loads(read_stored_text(source))
    except FileNotFoundError:
        raise SeedTotError(f"Trace file {str(source)!r} does not exist: check the path.") from None
    except (gzip.BadGzipFile, EOFError, zlib.error) as exc:
        raise SeedTotError(
            f"Trace file {str(stored_file(source))!r} is not a readable gzip file ({exc}): pass a seed-tot trace."
        ) from None
    except json.JSONDecodeError as exc:
        raise SeedTotError(
            f"Trace file {str(source)!r} is not valid JSON ({exc.msg}): pass a seed-tot trace."
        ) from None
    if not isinstance(data, dict) or "schema_version" not in data:
        raise SeedTotError(
            f"{str(source)!r} is not a seed-tot trace (it has no schema_version): pass a file from a run's traces/ folder."
        )
    version = data["schema_version"]
    if version != TRACE_SCHEMA_VERSION:
        raise SeedTotError(
            f"Trace file {str(source)!r} has schema version {version!r}, this seed-tot reads version "
            f"{TRACE_SCHEMA_VERSION}: load it with the seed-tot version that wrote it."
        )
    try:
        return Trace.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise SeedTotError(
            f"Trace file {str(source)!r} does not match the trace schema ({where}: {first['msg']}): "
            "pass an unmodified seed-tot trace."
        ) from None


def tree_from_trace(trace: Trace) -> ReasoningTree:
    """Rebuild the ReasoningTree a trace was written from (parents before children)."""
    tree = ReasoningTree()
    for record in sorted(trace.nodes, key=lambda r: (r.depth, r.id)):
        tree.insert(record.to_node())
    return tree
