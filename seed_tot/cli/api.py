"""`seed-tot api`: an OpenAI-compatible endpoint that answers every request with a reasoning tree."""

from __future__ import annotations

import json

import click

from seed_tot.cli.options import config_options, decode_options, method_options, model_options, search_options
from seed_tot.cli.api_server.budget import DEFAULT_MAX_REQUEST_TOKENS
from seed_tot.scheduling.methods import CONCURRENCY_DEFAULTS


def server_options(f):
    for option in reversed([
        click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on (0.0.0.0: every interface; then set --api-key)."),
        click.option("--port", type=int, default=8000, show_default=True, help="Port to listen on."),
        click.option("--api-key", "api_key", envvar="SEED_TOT_API_KEY", default=None, help="Require 'Authorization: Bearer KEY' on every route but /health (also from $SEED_TOT_API_KEY)."),
        click.option("--concurrency", type=int, default=None, help="Trees grown at once in the one shared batch (more requests wait in a queue). Default: " + CONCURRENCY_DEFAULTS + "."),
        click.option("--max-queue", "max_queue", type=int, default=256, show_default=True, help="Trees that may wait beyond --concurrency; a request beyond them gets 429 (retry later)."),
        click.option("--batching", type=click.Choice(["continuous", "rounds"]), default="continuous", show_default=True, help="How the trees share a batched executor (as for the task commands)."),
        click.option("--out", "out_dir", type=click.Path(file_okay=False), default="runs/api", show_default=True, help="Folder for the traces (OUT/traces/<trace id>.json)."),
        click.option("--max-request-tokens", "max_request_tokens", type=int, default=DEFAULT_MAX_REQUEST_TOKENS, show_default=True, help="Work budget of one request: the most tokens its settings may let its trees generate (n x thoughts x depth ... x max_tokens, counted before any work); a request over it gets 400 naming the setting to lower."),
        click.option("--shutdown-timeout", "shutdown_timeout", type=float, default=60.0, show_default=True, help="On Ctrl-C/SIGTERM: seconds the requests in flight may take to finish before their trees are cancelled."),
    ]):
        f = option(f)
    return f


def check_address(host: str, port: int) -> None:
    """Refuse an address this process cannot listen on, before any model loads."""
    import socket

    from seed_tot.errors import ConfigError

    if not 0 < port < 65536:
        raise ConfigError(f"--port must be between 1 and 65535 (got {port}).")
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise ConfigError(f"Cannot listen on --host {host!r} ({exc.strerror}): pass an address of this machine.") from None
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(address)
        except OSError as exc:
            raise ConfigError(f"Cannot listen on {host}:{port} ({exc.strerror}): pass another --port, or stop "
                              "what uses it.") from None


def printed_settings(config, server: dict, option_names: set[str]) -> dict:
    """What --print-config shows (and --config reads back): the resolved run settings and the
    server's own, under the options' names; the API key is never written out."""
    values = {**config.model_dump(mode="json"), **server}
    return {name: value for name, value in values.items()
            if name in option_names and name not in ("api_key", "config_file", "print_config")}


@click.command("api")
@server_options
@model_options
@method_options
@search_options
@decode_options
@config_options
def api(host: str, port: int, api_key: str | None, concurrency: int | None, max_queue: int, batching: str, out_dir: str,
        max_request_tokens: int, shutdown_timeout: float, print_config: bool, **options) -> None:
    """Serve an OpenAI-compatible API (/v1/models, /v1/chat/completions, /v1/completions, streaming)
    whose model ids name a task and a search, e.g. gsm8k/self-consistency, blocksworld/mcts. The
    search and decoding options set each model's defaults; a request's temperature, top_p, max_tokens,
    n and seed override them (docs/api_server.md)."""
    from seed_tot.cli.run_config import RunConfig
    from seed_tot.cli.api_server.server import serve
    from seed_tot.cli.api_server.service import ApiService, resolved_config

    config = RunConfig(**options, data_path=None, limit=None, start=0, ids=None, out_dir=out_dir,
                       resume=False, concurrency=concurrency, batching=batching)
    if print_config:
        server = {"host": host, "port": port, "max_queue": max_queue, "max_request_tokens": max_request_tokens,
                  "shutdown_timeout": shutdown_timeout}
        option_names = {p.name for p in click.get_current_context().command.params}
        return click.echo(json.dumps(printed_settings(resolved_config(config)[0], server, option_names), indent=2))
    check_address(host, port)
    if api_key is None and host not in ("127.0.0.1", "localhost", "::1"):
        click.echo(f"warning: listening on {host} without --api-key: anyone who reaches this port can use it", err=True)
    click.echo("loading models ...", err=True)
    service = ApiService(config, out_dir, max_queue=max_queue, own_thread=False, max_request_tokens=max_request_tokens)
    click.echo(f"seed-tot api on http://{host}:{port}/v1 ({service.config.method}, concurrency "
               f"{service.config.concurrency}); models: {', '.join(service.catalog)}", err=True)
    over = service.over_budget_defaults()
    if over:
        click.echo(f"warning: --max-request-tokens {max_request_tokens} is below what these models' defaults may "
                   f"generate, so their requests must ask for less: {', '.join(over)}", err=True)
    serve(service, host=host, port=port, api_key=api_key, shutdown_timeout=shutdown_timeout)
