"""The stop-signal watchdog of `seed-tot api`: a process of its own that ends the server when a stop
signal did not, whatever the server's threads are doing.

The server hands this process one byte per SIGINT or SIGTERM it receives: Python's C-level signal
handler writes the byte to the wakeup fd (signal.set_wakeup_fd), which is this process's stdin,
without taking the interpreter lock. So the byte arrives even while the server's main thread sits
in a call that holds that lock for good, when none of the server's own threads can run (its signal
watcher included). Each byte is passed on to stdout, where the server's signal watcher reads it and
stops the server cleanly. If the server is still alive `first` seconds after the first byte, or
`again` seconds after a later one, this process kills the server's other children and then the
server (SIGKILL). It ends when its stdin closes (the server closed it, or ended) or the server is
gone.

Run as a script, not imported: python watchdog.py <server pid> <first> <again>. It imports nothing
from seed_tot, so it starts in milliseconds."""

from __future__ import annotations

import os
import select
import signal
import sys
import time

POLL_SECONDS = 1.0  # how often an idle watchdog checks that its server is still its parent


def main(argv: list[str]) -> int:
    server, first, again = int(argv[1]), float(argv[2]), float(argv[3])
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the server decides what a Ctrl-C does
    deadline = None
    while True:
        if os.getppid() != server:  # the server is gone (this process was handed to another parent)
            return 0
        wait = POLL_SECONDS if deadline is None else min(POLL_SECONDS, max(0.0, deadline - time.monotonic()))
        ready, _, _ = select.select([0], [], [], wait)
        if ready:
            data = os.read(0, 64)
            if not data:  # the server closed its end: it is stopping by itself, or has stopped
                return 0
            now = time.monotonic()
            for _ in data:  # one byte per signal
                deadline = now + first if deadline is None else min(deadline, now + again)
            try:
                os.write(1, data)
            except OSError:  # the server's watcher is gone: the deadline still holds
                pass
        elif deadline is not None and time.monotonic() >= deadline:
            break
    if os.getppid() != server:
        return 0
    os.write(2, b"seed-tot api: the server did not stop in time after the stop signal (a call that never "
                b"lets its threads run?): killing it\n")
    for child in _children(server):
        if child != os.getpid():
            _kill(child)
    _kill(server)
    return 0


def _children(pid: int) -> list[int]:
    """The process's children (Linux: /proc), none where that cannot be read."""
    children: list[int] = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as file:
                children += [int(child) for child in file.read().split()]
    except OSError:
        pass
    return children


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass


if __name__ == "__main__":
    sys.exit(main(sys.argv))
