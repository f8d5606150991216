"""`seed-tot api` stops on Ctrl-C whatever its driver does: a server whose main thread sits in a call
that holds the interpreter lock for good (none of its own threads can run, its signal watcher
included) is killed by the watchdog process shutdown-timeout + 4.5 s after one SIGINT and 4.5 s after
a second; a server that can stop cleanly still does (code 0, nothing killed).

The server here is seed_tot.cli.api_server.server.serve() with a stand-in service (no model), so the
test takes seconds; the clocks are the bounds the server promises (+5 s), not tight figures."""

import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

SHUTDOWN = 1.0
READY = "driver: running"

SERVER = textwrap.dedent('''
    import re, sys, threading, types
    from seed_tot.cli.api_server import server

    stuck = sys.argv[1] == "stuck"
    stopped = threading.Event()

    class Driver:
        def run(self):
            print("{ready}", file=sys.stderr, flush=True)
            if stuck:
                re.match(r"(a+)+$", "a" * 48 + "b")  # backtracks for hours; the re engine never lets go of the GIL
            else:
                stopped.wait()

        def close(self, drain=True, timeout=None):
            stopped.set()
            return True

    driver = Driver()
    service = types.SimpleNamespace(driver=driver, catalog={{}}, max_request_tokens=1, close=driver.close)
    server.serve(service, port=server.free_port(), shutdown_timeout={shutdown}, log_level="warning")
''').format(ready=READY, shutdown=SHUTDOWN)


def _start(tmp_path: Path, mode: str) -> tuple[subprocess.Popen, Path]:
    log = tmp_path / f"{mode}.log"
    script = tmp_path / "server.py"
    script.write_text(SERVER)
    process = subprocess.Popen([sys.executable, str(script), mode], stdout=log.open("w"), stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while READY not in log.read_text():
        assert process.poll() is None and time.monotonic() < deadline, log.read_text()
        time.sleep(0.05)
    time.sleep(0.5)  # the driver is in its call
    return process, log


def _stop(process: subprocess.Popen, offsets: list[float], limit: float) -> tuple[float, int]:
    started = time.monotonic()
    for offset in offsets:
        time.sleep(max(0.0, started + offset - time.monotonic()))
        process.send_signal(signal.SIGINT)
    try:
        code = process.wait(limit + 10)
    finally:
        if process.poll() is None:
            process.kill()
    return time.monotonic() - started, code


def _watchdogs_of(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if any(a.endswith(b"watchdog.py") for a in argv) and str(pid).encode() in argv:
            found.append(int(entry.name))
    return found


def _no_watchdog_left(pid: int) -> bool:
    deadline = time.monotonic() + 5
    while _watchdogs_of(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


@pytest.mark.skipif(not Path("/proc/self").exists(), reason="reads /proc")
@pytest.mark.parametrize("offsets", [[0.0], [0.0, 0.5]], ids=["one SIGINT", "two SIGINTs"])
def test_a_server_stuck_in_a_call_that_holds_the_gil_still_stops(tmp_path, offsets):
    process, log = _start(tmp_path, "stuck")
    assert _watchdogs_of(process.pid)
    limit = (SHUTDOWN if len(offsets) == 1 else offsets[-1]) + 5
    seconds, code = _stop(process, offsets, limit)
    assert code == -signal.SIGKILL, log.read_text()
    assert seconds < limit, (seconds, log.read_text())
    assert "did not stop in time after the stop signal" in log.read_text()
    assert _no_watchdog_left(process.pid)


@pytest.mark.skipif(not Path("/proc/self").exists(), reason="reads /proc")
def test_a_server_that_can_stop_stops_cleanly_and_its_watchdog_with_it(tmp_path):
    process, log = _start(tmp_path, "idle")
    seconds, code = _stop(process, [0.0], SHUTDOWN + 5)
    assert code == 0, log.read_text()
    assert seconds < SHUTDOWN + 5
    assert "did not stop in time" not in log.read_text()
    assert _no_watchdog_left(process.pid)
