"""The HTTP routes (Starlette): /v1/models, /v1/chat/completions, /v1/completions, the traces.

Each request becomes n jobs (one tree each) on the service's driver thread; their progress and
results come back to this event loop through loop.call_soon_threadsafe. A client that goes away
cancels its trees (checked while it waits, and whenever a stream chunk cannot be sent).
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import secrets
import time

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from seed_tot.errors import SeedTotError
from seed_tot.cli.api_server.budget import default_work, heaviest_setting, over_budget, token_bound, work_of
from seed_tot.cli.api_server.catalog import OptionError, extension_names, request_config
from seed_tot.cli.api_server.jobs import DriverClosed, QueueFull
from seed_tot.cli.api_server.problems import ProblemError, problem_from_text
from seed_tot.cli.api_server.protocol import EXTENSION_CAPS, MAX_N, MAX_TOKENS, ApiError, ParsedRequest, chunk, parse_chat, parse_completion, reply, usage
from seed_tot.cli.api_server.replies import choice_of
from seed_tot.cli.api_server.service import ApiService, Finished

POLL_SECONDS = 0.5  # how often a waiting request checks that its client is still there
MAX_BODY_BYTES = 1 << 20
RETRY_AFTER_SECONDS = 5  # told to a client refused by a full queue

log = logging.getLogger("uvicorn.error")  # the server's own log, beside uvicorn's lines


def _error(exc: ApiError) -> JSONResponse:
    return JSONResponse(exc.body(), status_code=exc.status, headers=exc.headers)


async def _body(request: Request) -> bytes | None:
    """The request body, refused (413) by its Content-Length or as soon as the bytes received pass
    MAX_BODY_BYTES, so an oversized body is never held whole; None when the client went away."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > MAX_BODY_BYTES:
        raise _too_large(int(declared))
    parts, received = [], 0
    try:
        async for part in request.stream():
            received += len(part)
            if received > MAX_BODY_BYTES:
                raise _too_large(received, at_least=True)
            parts.append(part)
    except ClientDisconnect:
        log.info("%s %s: the client went away while sending the body", request.method, request.url.path)
        return None
    return b"".join(parts)


def _too_large(size: int, at_least: bool = False) -> ApiError:
    has = f"at least {size:,}" if at_least else f"{size:,}"
    return ApiError(413, f"The request body has {has} bytes: send at most {MAX_BODY_BYTES:,}.",
                    code="body_too_large")


def create_app(service: ApiService, api_key: str | None = None) -> Starlette:
    """The ASGI app over `service`; with `api_key`, every route but /health needs `Bearer KEY`."""

    def _model(model_id: str) -> dict:
        entry = service.catalog[model_id]
        limits = {"max_request_tokens": service.max_request_tokens,
                  "default_request_tokens": token_bound(default_work(entry)),
                  "n": MAX_N, "max_tokens": MAX_TOKENS,
                  "seed_tot": {name: cap for name, cap in EXTENSION_CAPS.items() if name in extension_names(entry)}}
        return {"id": model_id, "object": "model", "created": 0, "owned_by": "seed-tot",
                "seed_tot": {"task": entry.task_name, "search": entry.search_cls.name, "default": entry.default,
                             "limits": limits}}

    async def models(request: Request) -> Response:
        return JSONResponse({"object": "list", "data": [_model(model_id) for model_id in service.catalog]})

    async def model(request: Request) -> Response:
        model_id = request.path_params["model_id"]
        if model_id not in service.catalog:
            raise ApiError(404, f"The model {model_id!r} does not exist: GET /v1/models lists the ids.",
                           param="model", code="model_not_found")
        return JSONResponse(_model(model_id))

    async def chat(request: Request) -> Response:
        return await _complete(request, parse_chat)

    async def completions(request: Request) -> Response:
        return await _complete(request, parse_completion)

    async def trace_json(request: Request) -> Response:
        path = _trace_path(request.path_params["trace_id"])
        return Response(path.read_bytes(), media_type="application/json")

    async def trace_html(request: Request) -> Response:
        from seed_tot.cli.trace import bundled_task
        from seed_tot.observe.html_view import render_page, view_data

        name = request.path_params["name"]
        if not name.endswith(".html"):
            raise ApiError(404, "Trace pages are /traces/<trace id>.html.", code="not_found")
        path = _trace_path(name.removesuffix(".html"))
        return HTMLResponse(render_page(view_data(path, bundled_task)))

    async def health(request: Request) -> Response:
        driver = service.driver
        return JSONResponse({"status": "ok", "running": len(driver.running), "queued": driver.queued,
                             "completed": driver.completed, "cancelled": driver.cancelled, "rows": driver.rows,
                             "rows_cancelled": driver.rows_cancelled, "method": service.config.method})

    def _trace_path(trace_id: str):
        try:
            path = service.trace_file(trace_id)
        except SeedTotError as exc:
            raise ApiError(400, str(exc), param="trace_id") from None
        if not path.is_file():
            raise ApiError(404, f"No trace {trace_id!r}: trace ids come in the replies' seed_tot.trace_id.",
                           code="not_found")
        return path

    async def _complete(request: Request, parse) -> Response:
        raw = await _body(request)
        if raw is None:  # the client went away while sending it
            return Response(status_code=499)
        try:
            body = json.loads(raw or b"null")
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise ApiError(400, "The request body is not valid JSON.") from None
        req = parse(body)
        _check_room(service, req.n)  # a full queue refuses before anything is built
        entry = service.catalog.get(req.model)
        if entry is None:
            raise ApiError(404, f"The model {req.model!r} does not exist: GET /v1/models lists the ids "
                           f"(<task>/<search>, e.g. {next(iter(service.catalog), 'gsm8k/bfs')}).",
                           param="model", code="model_not_found")
        from seed_tot_tasks import get_task

        task = get_task(entry.task_name)
        try:
            problem = problem_from_text(task, req.text)
        except ProblemError as exc:
            raise ApiError(400, str(exc), param="messages" if req.kind == "chat" else "prompt",
                           code="invalid_problem") from None
        seed = req.seed if req.seed is not None else secrets.randbits(31)
        try:
            configs = [request_config(entry, seed=seed + i, temperature=req.temperature, top_p=req.top_p,
                                      max_tokens=req.max_tokens, extension=req.extension) for i in range(req.n)]
        except OptionError as exc:
            raise ApiError(400, str(exc), param=exc.param) from None
        work, default = work_of(configs[0], entry.search_cls.name, req.n, task), default_work(entry)
        refusal = over_budget(work, default, service.max_request_tokens)
        if refusal is not None:
            raise ApiError(400, refusal, param=heaviest_setting(work, default), code="over_budget")
        loop = asyncio.get_running_loop()
        events: asyncio.Queue = asyncio.Queue()

        def post(item) -> None:
            try:
                loop.call_soon_threadsafe(events.put_nowait, item)
            except RuntimeError:  # the loop is gone (shutdown): nobody waits for this any more
                pass

        jobs = [service.new_job(entry, problem, config,
                                on_done=lambda value, i=i: post(("done", i, value)),
                                on_progress=lambda event, i=i: post(("progress", i, event)))
                for i, config in enumerate(configs)]
        for job in jobs:
            job.owner = jobs[0].job_id  # the request's trees share one fair share of the batch
        _check_room(service, len(jobs), submit=jobs)
        reply_id = ("chatcmpl-" if req.kind == "chat" else "cmpl-") + jobs[0].job_id
        created = int(time.time())
        if req.stream:
            return StreamingResponse(_stream(request, req, jobs, events, reply_id, created, seed),
                                     media_type="text/event-stream", headers={"Cache-Control": "no-cache"})
        finished: dict[int, Finished] = {}
        completed = False
        try:
            while len(finished) < len(jobs):
                try:
                    kind, index, value = await asyncio.wait_for(events.get(), POLL_SECONDS)
                except (asyncio.TimeoutError, TimeoutError):
                    if await request.is_disconnected():
                        return Response(status_code=499)
                    continue
                if kind == "done":
                    if isinstance(value, BaseException):
                        raise _job_error(value)
                    finished[index] = value
            completed = True
        finally:
            if not completed:
                for job in jobs:
                    service.driver.cancel(job)
        choices = [choice_of(finished[i], entry, seed + i) for i in range(len(jobs))]
        return JSONResponse(reply(req, reply_id, created, choices, _summary(choices)))

    async def _stream(request: Request, req: ParsedRequest, jobs, events, reply_id: str, created: int, seed: int):
        completed = False
        totals = [0, 0]
        try:
            for i in range(len(jobs)):
                yield _sse(chunk(req, reply_id, created, i, role=True, content=""))
            left = len(jobs)
            while left:
                try:
                    kind, index, value = await asyncio.wait_for(events.get(), POLL_SECONDS)
                except (asyncio.TimeoutError, TimeoutError):
                    if await request.is_disconnected():
                        return
                    continue
                if kind == "progress":
                    yield _sse(chunk(req, reply_id, created, index, extension={"progress": value}))
                    continue
                left -= 1
                if isinstance(value, BaseException):
                    yield _sse(_job_error(value).body())
                    continue
                entry = service.catalog[req.model]
                c = choice_of(value, entry, seed + index)
                totals[0] += c["usage"]["prompt_tokens"]
                totals[1] += c["usage"]["completion_tokens"]
                yield _sse(chunk(req, reply_id, created, index, content=c["content"]))
                yield _sse(chunk(req, reply_id, created, index, finish_reason=c["finish_reason"],
                                 extension=c["seed_tot"]))
            if req.include_usage:
                yield _sse(chunk(req, reply_id, created, None, usage_=usage(*totals)))
            yield "data: [DONE]\n\n"
            completed = True
        finally:
            if not completed:
                for job in jobs:
                    service.driver.cancel(job)

    async def api_error(request: Request, exc: ApiError) -> Response:
        return _error(exc)

    async def http_error(request: Request, exc: HTTPException) -> Response:
        kind = "not_found" if exc.status_code == 404 else "invalid_request_error"
        return _error(ApiError(exc.status_code, f"{request.method} {request.url.path}: {exc.detail}.", kind))

    async def seed_tot_error(request: Request, exc: SeedTotError) -> Response:
        return _error(ApiError(400, str(exc)))

    routes = [
        Route("/v1/models", models, methods=["GET"]),
        Route("/v1/models/{model_id:path}", model, methods=["GET"]),
        Route("/v1/chat/completions", chat, methods=["POST"]),
        Route("/v1/completions", completions, methods=["POST"]),
        Route("/v1/traces/{trace_id}", trace_json, methods=["GET"]),
        Route("/traces/{name}", trace_html, methods=["GET"]),
        Route("/health", health, methods=["GET"]),
    ]
    app = Starlette(routes=routes, exception_handlers={ApiError: api_error, HTTPException: http_error,
                                                       SeedTotError: seed_tot_error})
    app.add_middleware(_RoomGate, service=service)
    if api_key:
        app.add_middleware(_KeyCheck, api_key=api_key)
    app.state.service = service
    return app


def _check_room(service: ApiService, trees: int, submit: list | None = None) -> None:
    """503 while the server stops, 429 (with Retry-After) when `trees` more would overflow the
    queue; with `submit`, queue those jobs (all or none)."""
    try:
        if submit is None:
            service.driver.check_room(trees)
        else:
            service.driver.submit(submit)
    except (DriverClosed, QueueFull) as exc:
        raise _room_error(exc) from None


def _room_error(exc: DriverClosed | QueueFull) -> ApiError:
    if isinstance(exc, DriverClosed):
        return ApiError(503, str(exc), type_="server_error", code="shutting_down")
    return ApiError(429, str(exc), type_="rate_limit_error", code="queue_full",
                    headers={"Retry-After": str(RETRY_AFTER_SECONDS)})


COMPLETION_PATHS = frozenset({"/v1/chat/completions", "/v1/completions"})


class _RoomGate:
    """ASGI middleware: while the queue is full or the server stops, a completion request is refused
    (429 with Retry-After, or 503) before its body is read or anything is routed: every request needs
    at least one tree. A request that passes is checked again for its own `n` once parsed."""

    def __init__(self, app, service: ApiService) -> None:
        self.app = app
        self.driver = service.driver

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "http" and scope["method"] == "POST" and scope["path"] in COMPLETION_PATHS:
            try:
                self.driver.check_room(1)
            except (DriverClosed, QueueFull) as exc:
                await _error(_room_error(exc))(scope, receive, send)
                return
        await self.app(scope, receive, send)


def _job_error(value: BaseException) -> ApiError:
    if isinstance(value, DriverClosed):
        return ApiError(503, str(value), type_="server_error", code="shutting_down")
    if isinstance(value, SeedTotError):
        return ApiError(400, str(value))
    return ApiError(500, f"The search failed: {type(value).__name__}: {value}", type_="server_error")


def _summary(choices: list[dict]) -> dict:
    first = dict(choices[0]["seed_tot"])
    first["trace_ids"] = [c["seed_tot"]["trace_id"] for c in choices]
    return first


def _sse(data: dict) -> str:
    return f"data: {json.dumps(data, ensure_ascii=False)}\n\n"


class _KeyCheck:
    """ASGI middleware: 401 unless `Authorization: Bearer <key>` (GET /health is open)."""

    def __init__(self, app, api_key: str) -> None:
        self.app = app
        self.expected = f"Bearer {api_key}".encode()

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "http" and scope["path"] != "/health":
            given = dict(scope.get("headers") or []).get(b"authorization", b"")
            if not hmac.compare_digest(given, self.expected):
                error = ApiError(401, "Missing or wrong API key: send the header 'Authorization: Bearer <key>' "
                                 "with the key the server was started with.", code="invalid_api_key")
                await _error(error)(scope, receive, send)
                return
        await self.app(scope, receive, send)


__all__ = ["create_app"]
