"""Ctrl-C held over the short critical sections of the worker pool (spawning, reaping)."""

from __future__ import annotations

import _thread
import signal
import threading
from contextlib import contextmanager


@contextmanager
def held_interrupts(reraise: bool = True):
    """Hold Ctrl-C (SIGINT) over a short critical section, then deliver it; none is lost.

    Inside, a SIGINT (or _thread.interrupt_main) is recorded instead of raising
    KeyboardInterrupt half-way through the section, and SIGINT stays blocked in this thread,
    so a child process started inside inherits it blocked (a draft worker cannot be killed by
    Ctrl-C before it ignores SIGINT). On exit the previous handler is restored and a held
    SIGINT is re-delivered to it: KeyboardInterrupt is raised right there (reraise=True), or on
    the main thread's next bytecode (reraise=False: for finalizers, which would swallow it).
    Outside the main thread (signal handlers run only there) it does nothing.
    """
    previous = signal.getsignal(signal.SIGINT) if threading.current_thread() is threading.main_thread() else None
    if previous is None:  # not the main thread, or a handler installed outside Python: leave it alone
        yield
        return
    held: list[int] = []
    signal.signal(signal.SIGINT, lambda signum, frame: held.append(signum))
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT}) if hasattr(signal, "pthread_sigmask") else None
    try:
        yield
    finally:
        if mask is not None:
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)  # a pending SIGINT reaches the recorder now
        signal.signal(signal.SIGINT, previous)  # runs the recorder for a tripped SIGINT first
        if held:
            if reraise or previous is signal.SIG_DFL:
                signal.raise_signal(signal.SIGINT)  # the previous handler runs before this returns
            else:
                _thread.interrupt_main(signal.SIGINT)
