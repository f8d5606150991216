"""Batches in flight in one continuous-batching session.

A search's batch joins the session as requests: all at once, or a few at a time where a driver
shares the rows out (the API server's fair share). Each ended request's result is kept at the
request's place in its batch; once every request of a batch has ended, the batch is done and its
outcome goes back to the search. A batch whose `decided` rule says that the requests still open
can no longer change it has them cancelled at once (seed_tot/search/early_vote.py): they come back
with finish_reason "cancelled", and one not yet sent is never sent.

Both drivers feed their sessions through a `SessionFeeder`: the CLI's (seed_tot/search/driver.py)
and the API server's (seed_tot/cli/api_server/driver.py).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from seed_tot.metrics import event_records
from seed_tot.requests import GenerationRequest, GenerationResult, Session, SessionEvents, cancelled_result
from seed_tot.search.steps import Batch, BatchOutcome, Task


@dataclass(eq=False)
class Flight:
    """One search's batch in a session: its requests as sent, the tickets of those added so far
    (in order) and the results of those that ended (by the request's index in the batch)."""

    task: Task
    batch: Batch
    requests: list[GenerationRequest]  # as sent (a driver may mark them, e.g. with a cancel flag)
    owner: Any = None  # whose batch this is, as the driver counts (the API server's job)
    tickets: list[int] = field(default_factory=list)
    results: dict[int, GenerationResult] = field(default_factory=dict)
    sent: float = field(default_factory=time.perf_counter)
    widest: int = 0  # most rows the session decoded at once while this batch was in flight
    events: list | None = None  # the session's scheduler events of these requests, once done

    @property
    def done(self) -> bool:
        return len(self.results) == len(self.requests)

    @property
    def waiting(self) -> int:
        """Requests not yet added to the session."""
        return 0 if self.done else len(self.requests) - len(self.tickets)

    @property
    def in_session(self) -> int:
        """Requests added to the session that have not ended."""
        return sum(index not in self.results for index in range(len(self.tickets)))

    def open_tickets(self) -> list[int]:
        return [ticket for index, ticket in enumerate(self.tickets) if index not in self.results]

    def outcome(self) -> BatchOutcome:
        """What the search is sent back (once done)."""
        return BatchOutcome(results=[self.results[index] for index in range(len(self.requests))],
                            wall_seconds=time.perf_counter() - self.sent,
                            events=event_records(self.events) if self.events is not None else None,
                            merged_size=self.widest)


class SessionFeeder:
    """The flights of one session: add a search's batch, send its requests, step, forget."""

    def __init__(self, session: Session):
        self.session = session
        self.flights: list[Flight] = []
        self._by_ticket: dict[int, tuple[Flight, int]] = {}

    def add(self, task: Task, requests: list[GenerationRequest] | None = None, owner: Any = None) -> Flight:
        """A flight for the task's waiting batch (`requests`: the batch's as they are to be sent);
        nothing joins the session before `send`."""
        flight = Flight(task, task.batch, list(task.batch.requests if requests is None else requests), owner)
        self.flights.append(flight)
        return flight

    def send(self, flight: Flight, count: int | None = None) -> None:
        """Add the flight's next `count` waiting requests (default: all of them) to the session."""
        start = len(flight.tickets)
        stop = len(flight.requests) if count is None else min(len(flight.requests), start + count)
        tickets = self.session.add(flight.requests[start:stop])
        flight.tickets.extend(tickets)
        self._by_ticket.update((ticket, (flight, start + offset)) for offset, ticket in enumerate(tickets))

    def step(self) -> list[Flight]:
        """One decode step of the session; the flights done now, taken out of the feeder."""
        width = self.session.width
        for flight in self.flights:
            flight.widest = max(flight.widest, width)
        done = []
        for ticket, result in self.session.step():
            entry = self._by_ticket.pop(ticket, None)
            if entry is None:  # cancelled while its result was on the way
                continue
            flight, index = entry
            flight.results[index] = result
            if not flight.done:
                self._cancel_if_decided(flight)
            if flight.done:
                done.append(flight)
        for flight in done:
            self.flights.remove(flight)
            if isinstance(self.session, SessionEvents):
                flight.events = self.session.take_events(flight.tickets)
        return done

    def forget(self, flights: list[Flight]) -> None:
        """Take these flights out: their requests still in the session are cancelled (queued ones
        never join, decoding ones leave the batch before the next step)."""
        open_tickets = [ticket for flight in flights for ticket in flight.open_tickets()]
        if open_tickets:
            self.session.cancel(open_tickets)
        for flight in flights:
            self.flights.remove(flight)
            for ticket in flight.tickets:
                self._by_ticket.pop(ticket, None)

    def _cancel_if_decided(self, flight: Flight) -> None:
        """Cancel the flight's open requests once its batch says they cannot change it."""
        decided = flight.batch.decided
        if decided is None or not decided([flight.results.get(i) for i in range(len(flight.requests))]):
            return
        rest = flight.open_tickets()
        self.session.cancel(rest)
        for ticket in rest:
            self._by_ticket.pop(ticket, None)
        for index, request in enumerate(flight.requests):
            if index not in flight.results:
                ticket = flight.tickets[index] if index < len(flight.tickets) else -1
                flight.results[index] = cancelled_result(request, ticket)
