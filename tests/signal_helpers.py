"""Child processes that answer Ctrl-C as they would at a terminal."""

import signal


def sigint_as_at_a_terminal() -> None:
    """Popen preexec_fn: a test runner started in the background (`cmd &`, nohup) passes SIGINT on
    ignored, and a Python child then never sees KeyboardInterrupt; with SIGINT at its default when
    the child starts, Python installs its own handler, as it does under a terminal."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
