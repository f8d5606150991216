"""What the API server's driver (seed_tot/cli/api_server/driver.py) grows: one `Job` per tree, and
the two refusals a request can meet before it is queued."""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable

from seed_tot.errors import SeedTotError
from seed_tot.requests import Cancel, GenerationRequest
from seed_tot.search.base import Search
from seed_tot.search.steps import Task
from seed_tot.task import Problem


class DriverClosed(SeedTotError):
    """The server is shutting down and accepts no new request."""


class QueueFull(SeedTotError):
    """More trees wait than the server was told to hold (--max-queue)."""


@dataclass(eq=False)
class Job:
    """One request's tree: its id (the trace id), search, problem and callbacks (driver thread)."""

    job_id: str
    search: Search
    problem: Problem
    on_done: Callable[[Any], None]  # called once with the finish() value or an exception
    on_progress: Callable[[dict], None] = lambda event: None
    owner: str = ""  # the request whose tree this is (its jobs share the fair share); "" : the job's own id
    flag: Cancel = field(default_factory=Cancel)  # set with `cancelled`; carried by every request it sends
    cancelled: bool = False
    finished: bool = False
    root: Task | None = None
    prompt_tokens: int = 0  # prompt tokens of every request the tree sent
    completion_tokens: int = 0  # tokens generated for the tree
    batches: int = 0
    submitted: float = field(default_factory=time.perf_counter)


def flagged(requests: list[GenerationRequest], job: Job) -> list[GenerationRequest]:
    """The requests as sent for `job`: each carries the job's cancel flag (the search's own stay as they are)."""
    return [replace(request, cancel=job.flag) for request in requests]
