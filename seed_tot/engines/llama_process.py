"""The child process that runs llama.cpp's HTTP server (the `xllamacpp` wheel) on 127.0.0.1.

`python -m seed_tot.engines.llama_process --model M.gguf --port P --slots N [--draft D.gguf]`
loads the model(s), starts the server, prints one line `READY <url>` on stdout, then serves
until its stdin closes or it receives SIGTERM/SIGINT. Reading stdin ties the server's life to
its parent: when the parent dies, the pipe closes and the server exits too (no orphans).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading


def server_params(args: argparse.Namespace):
    """xllamacpp CommonParams for one server: N slots with continuous batching and prompt cache."""
    import xllamacpp as xlc

    params = xlc.CommonParams()
    params.model.path = args.model
    params.hostnames = ["127.0.0.1"]
    params.port = args.port
    params.n_parallel = args.slots
    params.n_ctx = args.ctx_per_slot * args.slots
    params.cont_batching = True
    params.warmup = False
    params.endpoint_props = True
    params.endpoint_slots = True
    if args.threads:
        params.cpuparams.n_threads = args.threads
        params.cpuparams_batch.n_threads = args.threads
    if args.draft:
        draft = params.speculative.draft
        draft.mparams.path = args.draft
        draft.n_max = args.draft_max
        draft.n_min = 0
        draft.p_min = 0.0
        if args.threads:
            draft.cpuparams.n_threads = args.threads
            draft.cpuparams_batch.n_threads = args.threads
        params.speculative.types = [xlc.common_speculative_type.COMMON_SPECULATIVE_TYPE_DRAFT_SIMPLE]
    return params


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--slots", type=int, default=4)
    parser.add_argument("--ctx-per-slot", type=int, default=4096)
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument("--draft", default="")
    parser.add_argument("--draft-max", type=int, default=8)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    import xllamacpp as xlc

    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    server = xlc.Server(server_params(args))
    print(f"READY {server.listening_address}", flush=True)

    def watch_parent() -> None:
        sys.stdin.read()  # returns when the parent closes the pipe or dies
        stop.set()

    threading.Thread(target=watch_parent, daemon=True).start()
    stop.wait()
    # llama.cpp's server threads do not always stop promptly; the process exits at once instead.
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
