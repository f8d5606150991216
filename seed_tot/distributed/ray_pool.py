"""solve_on_ray: problems run on a pool of Ray actors, each holding one executor; every finished
problem streams back to the caller (the driver), which alone writes results and traces.

An actor that dies (killed, out of memory, its node lost) has each of its unfinished problems
retried once on another actor; a dead actor is replaced while replacements last. A problem that
fails twice comes back as `Failed`. Ray is imported here only, and only when a pool starts.
"""

from __future__ import annotations

import logging
import re
import socket
from collections import deque
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Iterable, Iterator

from seed_tot.distributed.spec import ExecutorSpec
from seed_tot.distributed.work import Failed, Finished, SearchWork, start_solver
from seed_tot.errors import ConfigError, SeedTotError
from seed_tot.task import Problem

RAY_VERSION = "2.60.0"  # the version the tests ran with (pyproject's `ray` extra)
ATTEMPTS = 2  # a problem whose worker dies is tried once more elsewhere, then recorded as failed


class RayWorker:
    """The body of one Ray actor: a ProblemSolver, or the sentence that says why it could not load."""

    def __init__(self, spec: ExecutorSpec, work: SearchWork):
        self.solver, self.error = start_solver(spec, work)

    def info(self) -> dict[str, Any]:
        from seed_tot.distributed.work import worker_name

        return {"worker": worker_name(), "error": self.error} if self.solver is None else self.solver.info()

    def solve(self, problems: list[Problem], concurrency: int, continuous: bool) -> Iterator[Finished]:
        yield from self.solver.solve(problems, concurrency, continuous)

    def close(self) -> None:
        if self.solver is not None:
            self.solver.close()


def import_ray():
    try:
        import ray
    except ImportError:
        raise SeedTotError(f'--ray needs Ray: pip install "seed-tot[ray]" (ray {RAY_VERSION}).') from None
    return ray


def connect(ray, address: str | None, init_options: dict | None = None) -> bool:
    """Join the Ray cluster at `address` (None: RAY_ADDRESS, a cluster started on this machine with
    `ray start --head`, or else a new local one); True when this call connected (so it disconnects)."""
    if ray.is_initialized():
        return False
    if address:
        check_reachable(address)
    try:
        ray.init(address=address or None, logging_level=logging.ERROR, **(init_options or {}))
    except (ConnectionError, TimeoutError, ValueError, RuntimeError) as exc:
        where = f"at {address}" if address else "(RAY_ADDRESS or a local `ray start --head`)"
        raise SeedTotError(
            f"Could not join the Ray cluster {where}: {_first_line(exc)}; start one with `ray start --head` "
            "and pass the address it prints, or give --ray without an address to start Ray on this machine."
        ) from None
    return True


def check_reachable(address: str, timeout: float = 5.0) -> None:
    """Refuse at once a HOST:PORT (or ray://HOST:PORT) nothing listens on: ray.init would retry for minutes."""
    match = re.fullmatch(r"(?:ray://)?\[?([^\]/]+?)\]?:(\d+)", address.strip())
    if match is None:
        return  # "auto", "local" and the like: Ray resolves them itself
    host, port = match.group(1), int(match.group(2))
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except OSError as exc:
        raise SeedTotError(
            f"Nothing answers at the Ray address {address} ({exc.strerror or exc}): start the cluster with "
            "`ray start --head` and pass the address it prints, or give --ray alone to start Ray on this machine."
        ) from None


def plan_actors(nodes: list[dict], actors: int | None, cpus_per_actor: int | None) -> tuple[int, int]:
    """(actors, CPUs each) that fit the alive nodes. Defaults: each actor takes the smallest node's
    CPUs (so one actor per machine of that size) and as many actors as the nodes hold; for a given
    number of actors, the most CPUs each that still fit them all."""
    node_cpus = [int(n["Resources"].get("CPU", 0)) for n in nodes if n.get("Alive")]
    node_cpus = [c for c in node_cpus if c > 0]
    if not node_cpus:
        raise SeedTotError("The Ray cluster has no node with a CPU: add one with `ray start --address ...`.")
    if actors is not None and actors < 1:
        raise ConfigError(f"--ray-actors must be at least 1 (got {actors}).")
    if cpus_per_actor is None:
        cpus_per_actor = min(node_cpus) if actors is None else max(
            [c for c in range(1, max(node_cpus) + 1) if sum(n // c for n in node_cpus) >= actors], default=1)
    if cpus_per_actor < 1 or cpus_per_actor > max(node_cpus):
        raise ConfigError(f"Each Ray actor would need {cpus_per_actor} CPUs but the largest node has {max(node_cpus)}: "
                          "lower --threads.")
    fits = sum(c // cpus_per_actor for c in node_cpus)
    actors = fits if actors is None else actors
    if actors > fits:
        raise ConfigError(f"{actors} Ray actors of {cpus_per_actor} CPUs each do not fit the cluster's nodes "
                          f"({', '.join(map(str, node_cpus))} CPUs): use --ray-actors {fits} or fewer, or lower --threads.")
    return actors, cpus_per_actor


@dataclass(eq=False)
class _Actor:
    handle: Any
    name: str = ""  # host:pid once it answered


@dataclass(eq=False)
class _Unit:
    problem: Problem
    tried: list[str] = field(default_factory=list)  # workers it was lost on


@dataclass(eq=False)
class _Job:
    actor: _Actor
    units: dict[str, _Unit]  # by problem id, until each one finishes


class ActorPool:
    """Hands problems to idle actors (up to `concurrency` per call, a retry alone), follows their
    result streams, and replaces actors that die."""

    def __init__(self, ray, spec: ExecutorSpec, work: SearchWork, actors: int, cpus_per_actor: int,
                 concurrency: int, continuous: bool):
        self.ray = ray
        self.actor_class = ray.remote(RayWorker).options(
            num_cpus=cpus_per_actor, max_restarts=0, max_task_retries=0, scheduling_strategy="SPREAD")
        self.spec = spec if spec.threads else replace(spec, threads=cpus_per_actor)
        self.work = work
        self.concurrency = concurrency
        self.continuous = continuous
        self.replacements_left = actors
        self.idle: list[_Actor] = []
        self.starting: dict[Any, _Actor] = {}  # info ref -> actor loading its models
        self.jobs: dict[Any, _Job] = {}  # result stream -> job
        self.queue: deque[_Unit] = deque()
        self.infos = self._start(actors)

    def _start(self, count: int) -> list[dict]:
        """Start `count` actors and wait until each has loaded its models (or said why it could not)."""
        actors = [_Actor(self.actor_class.remote(self.spec, self.work)) for _ in range(count)]
        infos = []
        for actor in actors:
            info = self._info(actor)
            infos.append(info)
            if info.get("error"):
                self.ray.kill(actor.handle)
            else:
                actor.name = info["worker"]
                self.idle.append(actor)
        if not self.idle:
            raise SeedTotError(f"No Ray actor could load its models: {infos[0]['error']}")
        return infos

    def _info(self, actor: _Actor, ref=None) -> dict:
        try:
            return self.ray.get(ref if ref is not None else actor.handle.info.remote())
        except self.ray.exceptions.RayError as exc:
            return {"worker": "", "error": f"the actor died while loading ({_first_line(exc)})"}

    def run(self, problems: Iterable[Problem]) -> Iterator[Finished | Failed]:
        self.queue.extend(_Unit(p) for p in problems)
        while self.queue or self.jobs or self.starting:
            self._dispatch()
            if not self.jobs and not self.starting:
                if self.queue and not self.idle:
                    yield from (Failed(u.problem, "no Ray actor is left to run it", len(u.tried), u.tried)
                                for u in self.queue)
                    self.queue.clear()
                continue
            ready, _ = self.ray.wait([*self.jobs, *self.starting], num_returns=1)
            if ready[0] in self.starting:
                self._started(ready[0])
            else:
                yield from self._advance(ready[0])

    def _dispatch(self) -> None:
        for actor in list(self.idle):
            units = self._units_for(actor)
            if not units:
                continue
            self.idle.remove(actor)
            width = self.concurrency if len(units) > 1 else 1
            stream = actor.handle.solve.remote([u.problem for u in units], width, self.continuous)
            self.jobs[stream] = _Job(actor, {u.problem.id: u for u in units})

    def _units_for(self, actor: _Actor) -> list[_Unit]:
        """A retry alone, on an actor it was not lost on when one is alive; else up to `concurrency` new problems."""
        alive = {a.name for a in self.idle} | {j.actor.name for j in self.jobs.values()}
        for unit in self.queue:
            if unit.tried and (actor.name not in unit.tried or alive <= set(unit.tried)):
                self.queue.remove(unit)
                return [unit]
        fresh = [u for u in self.queue if not u.tried][: self.concurrency]
        for unit in fresh:
            self.queue.remove(unit)
        return fresh

    def _advance(self, stream) -> Iterator[Finished | Failed]:
        job = self.jobs[stream]
        try:
            finished = self.ray.get(next(stream))
        except StopIteration:
            del self.jobs[stream]
            self.idle.append(job.actor)
            yield from self._lose(job, "its search ended without a result")
            return
        except self.ray.exceptions.RayActorError as exc:  # the actor process is gone
            del self.jobs[stream]
            self.ray.kill(job.actor.handle)
            self._replace()
            yield from self._lose(job, f"its Ray actor {job.actor.name} died ({_first_line(exc)})")
            return
        except self.ray.exceptions.RayTaskError as exc:  # the search raised; the actor lives on
            del self.jobs[stream]
            self.idle.append(job.actor)
            yield from self._lose(job, _last_line(exc))
            return
        unit = job.units.pop(finished.problem.id)
        finished.attempts = len(unit.tried) + 1
        yield finished

    def _lose(self, job: _Job, reason: str) -> Iterator[Failed]:
        """Each unfinished problem of `job` goes back to the queue's front, or fails on its last attempt."""
        for unit in reversed(list(job.units.values())):
            unit.tried.append(job.actor.name)
            if len(unit.tried) >= ATTEMPTS:
                yield Failed(unit.problem, reason, len(unit.tried), unit.tried)
            else:
                self.queue.appendleft(unit)
        job.units.clear()

    def _replace(self) -> None:
        if self.replacements_left > 0:
            self.replacements_left -= 1
            actor = _Actor(self.actor_class.remote(self.spec, self.work))
            self.starting[actor.handle.info.remote()] = actor

    def _started(self, ref) -> None:
        actor = self.starting.pop(ref)
        info = self._info(actor, ref)
        if info.get("error"):
            self.ray.kill(actor.handle)
        else:
            actor.name = info["worker"]
            self.idle.append(actor)

    def close(self) -> None:
        """Let idle actors close their executors, then end every actor this pool started."""
        idle = [a.handle.close.remote() for a in self.idle]
        if idle:
            self.ray.wait(idle, num_returns=len(idle), timeout=10)
        for actor in [*self.idle, *(j.actor for j in self.jobs.values()), *self.starting.values()]:
            self.ray.kill(actor.handle)


def solve_on_ray(
    spec: ExecutorSpec,
    work: SearchWork,
    problems: Iterable[Problem],
    *,
    address: str | None = None,
    actors: int | None = None,
    cpus_per_actor: int | None = None,
    concurrency: int = 1,
    continuous: bool = True,
    init_options: dict | None = None,
    on_ready: Callable[[list[dict]], None] | None = None,
) -> Iterator[Finished | Failed]:
    """Search `problems` on Ray actors that each build `spec`'s executor; yield each problem as it ends.

    `address`: the cluster to join (None: RAY_ADDRESS, a local `ray start --head`, else a new local
    Ray); nothing is done when Ray is already initialised in this process. `actors` and
    `cpus_per_actor` default to one actor per machine (plan_actors). Each actor searches up to
    `concurrency` problems at once, sharing its executor as solve_many does. `on_ready` gets each
    actor's info (worker, models, dtype, peak RSS) once all have loaded.
    """
    if concurrency < 1:
        raise ConfigError(f"concurrency must be at least 1 (got {concurrency}).")
    ray = import_ray()
    connected_here = connect(ray, address, init_options)
    pool = None
    try:
        count, cpus = plan_actors(ray.nodes(), actors, cpus_per_actor)
        pool = ActorPool(ray, spec, work, count, cpus, concurrency, continuous)
        if on_ready is not None:
            on_ready(pool.infos)
        yield from pool.run(problems)
    finally:
        if pool is not None:
            pool.close()
        if connected_here:
            ray.shutdown()


_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _lines(exc: BaseException) -> list[str]:
    return [line.strip() for line in _ANSI.sub("", str(exc)).splitlines() if line.strip()]


def _first_line(exc: BaseException) -> str:
    return (_lines(exc) or [type(exc).__name__])[0].rstrip(".")


def _last_line(exc: BaseException) -> str:
    return (_lines(exc) or [type(exc).__name__])[-1].rstrip(".")
