"""The server executor: every GenerationRequest becomes its own HTTP request to an inference
server, up to `parallel` at once, so the server's continuous batching and prompt cache do the
batching. Results come back in request order; a request's tokens depend only on its own prompt,
seed and settings, never on what else runs beside it.

A request that gets no answer (connection refused, timeout, 5xx) is retried with bounded
back-off; after the last try the run stops with one sentence. Problems finished before that are
already saved, and `--resume` continues once the server is back.
"""

from __future__ import annotations

import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Callable

from seed_tot.decoding.token_sink import TokenSink, stop_rule
from seed_tot.engines import llama_api, openai_api
from seed_tot.engines.connect import ServerInfo
from seed_tot.engines.http import Abort, Aborted, Refused, Unreachable, call_json
from seed_tot.errors import ConfigError, EngineError
from seed_tot.requests import GenerationRequest, GenerationResult


class ServerExecutor:
    def __init__(
        self,
        info: ServerInfo,
        tokenizer,
        parallel: int = 4,
        timeout: float = 600.0,
        retries: int = 3,
        backoff: float = 1.0,
        name: str = "server",
        on_close: Callable[[], None] | None = None,
    ):
        if parallel < 1:
            raise ConfigError(f"--server-parallel must be at least 1 (got {parallel}).")
        self.info = info
        self.tokenizer = tokenizer
        self.parallel = parallel
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self.name = name
        self.eos_token_ids = tokenizer_eos_ids(tokenizer)
        self._pool = ThreadPoolExecutor(max_workers=parallel, thread_name_prefix="seed-tot-server")
        self._on_close = on_close
        self._closed = False

    # ------------------------------------------------------------------ Executor protocol

    def run(self, requests: list[GenerationRequest]) -> list[GenerationResult]:
        futures = [self._pool.submit(self.generate, request) for request in requests]
        return [future.result() for future in futures]

    def session(self) -> "ServerSession":
        return ServerSession(self)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        # Queued requests are dropped; stopping our own server first makes the requests in flight
        # fail at once instead of holding Ctrl-C or an error for up to --server-timeout.
        self._pool.shutdown(wait=False, cancel_futures=True)
        if self._on_close is not None:
            self._on_close()
        self._pool.shutdown(wait=True)

    # ------------------------------------------------------------------ one request

    def generate(self, request: GenerationRequest, abort: Abort | None = None) -> GenerationResult:
        """One request's result; `abort` closes its connection (the server then stops it) and this
        raises Aborted, never retried."""
        started = time.perf_counter()
        reply = self._post_with_retries(request, abort)
        result = self._result(request, reply)
        result.stats.wall_seconds = time.perf_counter() - started
        return result

    def _body(self, request: GenerationRequest) -> tuple[str, dict]:
        if self.info.api == "llama.cpp":
            return llama_api.PATH, llama_api.completion_body(request)
        return openai_api.PATH, openai_api.completion_body(request, self.info.model)

    def _post_with_retries(self, request: GenerationRequest, abort: Abort | None = None) -> dict:
        path, body = self._body(request)
        delay = self.backoff
        for attempt in range(self.retries + 1):
            try:
                return call_json(self.info.url, path, body, self.timeout, abort)
            except Refused as exc:
                raise EngineError(
                    f"The server at {self.info.url} refused a request ({exc}): check that it serves the model "
                    "given as --target and that the prompt fits its context size."
                ) from None
            except Unreachable as exc:
                if abort is not None and abort.requested:
                    raise Aborted(str(exc)) from None
                if self._closed or attempt == self.retries:
                    raise EngineError(
                        f"The server at {self.info.url} stopped answering ({exc}; {attempt + 1} tries): the problems "
                        "finished so far are saved; restart the server and rerun the same command with --resume."
                    ) from None
                time.sleep(delay)
                delay *= 2
        raise AssertionError("unreachable")

    def _result(self, request: GenerationRequest, reply: dict) -> GenerationResult:
        api = llama_api if self.info.api == "llama.cpp" else openai_api
        tokens = api.reply_tokens(reply)
        if tokens is None:  # text only: connect() refuses such servers; never re-encode the text
            raise EngineError(openai_api.text_only_message(self.info.url))
        reason = api.finish_reason(reply)
        if reason == "eos" and not request.config.ignore_eos and (not tokens or tokens[-1] not in self.eos_token_ids):
            tokens.append(min(self.eos_token_ids))  # servers drop the EOS token; the project keeps it
        tokens, reason = self._apply_stop_rule(request, tokens, reason)
        stats = api.reply_stats(reply, len(tokens))
        stats.cached_prompt_tokens = api.cached_prompt_tokens(reply)
        return GenerationResult(
            request_id=request.request_id,
            token_ids=tokens,
            text=self.tokenizer.decode(tokens, skip_special_tokens=True),
            finish_reason=reason,
            stats=stats,
        )

    def _apply_stop_rule(self, request: GenerationRequest, tokens: list[int], reason: str) -> tuple[list[int], str]:
        """Cut where the project's own decoders stop (right after the token that completes a stop
        string or is EOS), so results mean the same whichever engine made them."""
        sink = TokenSink(stop_rule(request.config, self.eos_token_ids,
                                   lambda ids: self.tokenizer.decode(ids, skip_special_tokens=True)))
        sink.extend(tokens)
        return sink.token_ids, sink.finish_reason or reason


def tokenizer_eos_ids(tokenizer) -> frozenset[int]:
    """The token ids that end a reply: the tokenizer's end-of-sequence token (0 where it names none)."""
    ids = {int(tokenizer.eos_token_id)} if tokenizer.eos_token_id is not None else set()
    return frozenset(ids) or frozenset({0})


class ServerSession:
    """Continuous batching over problems: requests go to the server as soon as a search asks for
    them, and each comes back on its own; `step` waits for at least one to finish."""

    def __init__(self, executor: ServerExecutor):
        self.executor = executor
        self.pending: dict[Future, int] = {}
        self.aborts: dict[int, Abort] = {}
        self.next_ticket = 0

    def add(self, requests: list[GenerationRequest]) -> list[int]:
        tickets = []
        for request in requests:
            abort = Abort()
            future = self.executor._pool.submit(self.executor.generate, request, abort)
            self.pending[future] = self.next_ticket
            self.aborts[self.next_ticket] = abort
            tickets.append(self.next_ticket)
            self.next_ticket += 1
        return tickets

    def cancel(self, tickets: list[int]) -> None:
        """Drop these requests: those not yet sent are never sent; a request the server is already
        answering has its connection closed, so the server stops decoding it and frees its slot."""
        dropped = set(tickets)
        for future in [f for f, ticket in self.pending.items() if ticket in dropped]:
            if not future.cancel():
                self.aborts[self.pending[future]]()
            del self.pending[future]
        for ticket in dropped:
            self.aborts.pop(ticket, None)

    @property
    def width(self) -> int:
        return len(self.pending)

    @property
    def busy(self) -> bool:
        return bool(self.pending)

    def step(self) -> list[tuple[int, GenerationResult]]:
        if not self.pending:
            return []
        done, _ = wait(list(self.pending), return_when=FIRST_COMPLETED)
        ended = [(self.pending.pop(future), future) for future in done]
        for ticket, _ in ended:
            self.aborts.pop(ticket, None)
        return [(ticket, future.result()) for ticket, future in ended]
