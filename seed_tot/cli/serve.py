"""`seed-tot serve`: llama.cpp's server on 127.0.0.1 with the default models, until Ctrl-C."""

from __future__ import annotations

import signal
import time

import click


@click.command()
@click.option("--target", default="default-target", show_default=True, help="Target model: a default alias or a .gguf file.")
@click.option("--draft", default="default-draft", show_default=True, help="Draft model for --with-draft: a default alias or a .gguf file.")
@click.option("--with-draft", "with_draft", is_flag=True, help="Speculative decoding with --draft as llama.cpp's draft model.")
@click.option("--tiny", is_flag=True, help="Serve the tiny random-weight pair (written as GGUF; for smoke tests).")
@click.option("--slots", type=int, default=4, show_default=True, help="Requests decoded at once (continuous batching).")
@click.option("--threads", type=int, default=None, help="llama.cpp threads (default: the cores this process may use; fewer can be faster on a busy shared CPU).")
@click.option("--ctx-per-slot", type=int, default=4096, show_default=True, help="Context tokens of each slot (prompt + new tokens).")
@click.option("--port", type=int, default=0, help="Port on 127.0.0.1 (default: a free one).")
def serve(target: str, draft: str, with_draft: bool, tiny: bool, slots: int, threads: int | None,
          ctx_per_slot: int, port: int) -> None:
    """Start llama.cpp's server with the default target (and draft) and print its URL."""
    from seed_tot.engines.embedded import LlamaServer, LlamaServerSettings, default_threads
    from seed_tot.engines.setup import gguf_path

    if tiny:
        target, draft = "tiny-target", "tiny-draft"
    settings = LlamaServerSettings(
        model=gguf_path(target), draft=gguf_path(draft) if with_draft else None, slots=slots,
        ctx_per_slot=ctx_per_slot, threads=threads or default_threads(), port=port,
    )
    with LlamaServer(settings) as server:
        click.echo(f"llama.cpp is serving {settings.model}" + (f" with draft {settings.draft}" if settings.draft else "")
                   + f" ({slots} slots, {settings.threads} threads) at {server.url}")
        click.echo(f"use it with: seed-tot gsm8k --method server --server-url {server.url}"
                   + (" --tiny" if tiny else "") + "   (Ctrl-C stops the server)")
        signal.signal(signal.SIGTERM, _interrupt)
        try:
            while server.process.poll() is None:
                time.sleep(1)
        except KeyboardInterrupt:
            pass
    click.echo("server stopped")


def _interrupt(*_) -> None:
    raise KeyboardInterrupt
