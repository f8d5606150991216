"""The optional executor capabilities declared in seed_tot/requests.py, and the progress wrapper
that must offer exactly the capabilities of the executor it wraps."""

import inspect

from scripted_executor import ScriptedExecutor
from search_helpers import TOKENIZER, idea_reply

from seed_tot.requests import ContinuousBatching, GenerationRequest, RecordsEvents, SessionEvents
from seed_tot.scheduling.factory import make_executor
from seed_tot.scheduling.progress import ProgressExecutor, ProgressSession


class Bar:
    def update(self, n: int) -> None: ...

    def set_postfix_str(self, text: str) -> None: ...


class NoEvents:
    name = "plain"

    def run(self, requests):
        return []

    def close(self) -> None: ...


def test_progress_wrapper_offers_sessions_only_where_the_inner_executor_does(tiny_pair):
    batched = make_executor("batched", tiny_pair[1])
    assert isinstance(batched, ContinuousBatching)
    assert isinstance(ProgressExecutor(batched, Bar()), ContinuousBatching)
    assert isinstance(ProgressExecutor(batched, Bar()).session(), ProgressSession)
    assert not isinstance(ProgressExecutor(ScriptedExecutor(TOKENIZER, idea_reply), Bar()), ContinuousBatching)


def test_progress_wrapper_passes_the_inner_events_on():
    inner = ScriptedExecutor(TOKENIZER, idea_reply, events=True)
    wrapped = ProgressExecutor(inner, Bar())
    wrapped.run([GenerationRequest(prompt_ids=TOKENIZER.encode("THINK"), request_id="r0")])
    assert isinstance(wrapped, RecordsEvents) and wrapped.last_events == inner.last_events != []
    inspect.getattr_static(wrapped, "last_events")  # seen by Python 3.12+'s protocol check too
    assert ProgressExecutor(NoEvents(), Bar()).last_events is None


def test_progress_session_hands_out_events_only_where_the_inner_session_does(tiny_pair):
    class EventSession:
        busy, width = False, 0

        def add(self, requests):
            return []

        def step(self):
            return []

        def take_events(self, tickets):
            return [{"tickets": tickets}]

    plain_session = make_executor("batched", tiny_pair[1]).session()
    assert not isinstance(ProgressSession(plain_session, Bar()), SessionEvents)
    wrapped = ProgressSession(EventSession(), Bar())
    assert isinstance(wrapped, SessionEvents) and wrapped.take_events([3]) == [{"tickets": [3]}]
    # Python 3.12+ checks protocols with inspect.getattr_static: __getattr__ delegation is not enough
    inspect.getattr_static(wrapped, "take_events")
