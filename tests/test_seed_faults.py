"""SEED failure paths: configuration errors raise before any process starts; a worker that is
killed, raises or hangs makes run() fail fast with its message; Ctrl-C raises KeyboardInterrupt
wherever it lands; no process outlives any exit path.

Every test is independent of timing and order: faults and interrupts are triggered by the
condition they need (the N-th verification, the verifier waiting for a hung worker), never
by a timer; each test gets its own executor; an autouse fixture reaps whatever a test leaves
and compares only with the children that existed before the test.
"""

import _thread
import multiprocessing
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from multiprocessing import resource_tracker
from pathlib import Path

import pytest

import seed_tot.scheduling.seed.pool as seed_pool
import seed_tot.scheduling.seed.verifier as seed_verifier
from seed_tot.config import DecodeConfig
from seed_tot.errors import ConfigError, ModelNotFoundError, TokenizerMismatchError, WorkerError
from seed_tot.requests import GenerationRequest
from seed_tot.scheduling.seed import SeedExecutor, SeedOptions
from seed_tot.scheduling.seed.worker import NamedDraft, TinyDraft

pytestmark = pytest.mark.slow  # SEED worker faults

REPO = Path(__file__).resolve().parents[1]


def children_of(pid: int) -> list[int]:
    """Pids whose parent is `pid`, from /proc (no psutil)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # the command name (field 2) may hold spaces: the parent pid follows its closing ")"
        fields = stat[stat.rindex(")") + 2 :].split()
        if int(fields[1]) == pid:
            found.append(int(entry.name))
    return found


def alive(pid: int) -> bool:
    """The process exists and is not a zombie (an orphan's zombie waits for init to reap it)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"


def our_children() -> set[int]:
    """Child processes of this test process, except multiprocessing's own resource tracker
    (started by the first spawn and shared by the whole interpreter, not a worker)."""
    tracker = getattr(resource_tracker._resource_tracker, "_pid", None)
    return {pid for pid in children_of(os.getpid()) if pid != tracker}


@pytest.fixture(autouse=True)
def python_handles_ctrl_c():
    """Python's own SIGINT handler for every test. A runner started in the background (`cmd &`,
    nohup) inherits SIGINT ignored, and then neither Ctrl-C nor _thread.interrupt_main does
    anything: the interrupt tests would test nothing (or wait forever)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


@pytest.fixture(autouse=True)
def no_stray_workers():
    """check(pids): within 10 s, none of `pids` is alive and this process has no child that
    the test started (children from before the test, e.g. another module's, are not its).
    Teardown kills and reaps whatever the test left, so a failing test cannot fail the next."""
    before = our_children()

    def stray(pids) -> set[int]:
        multiprocessing.active_children()  # joins finished multiprocessing children
        return (our_children() - before) | {pid for pid in pids if alive(pid)}

    def check(pids=()) -> None:
        deadline = time.monotonic() + 10.0
        while stray(pids) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert stray(pids) == set()

    yield check
    for child in multiprocessing.active_children():
        if child.pid not in before:
            child.kill()
            child.join(10)
    for pid in our_children() - before:
        try:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass


def long_requests(n: int = 2) -> list[GenerationRequest]:
    return [GenerationRequest(list(b"a long generation "), DecodeConfig(max_new_tokens=3000), seed=i) for i in range(n)]


@pytest.fixture
def target(tiny_pair):
    return tiny_pair[1]


@pytest.fixture
def executor(target):
    """A fresh one-worker executor per test (no state shared between tests)."""
    ex = SeedExecutor(target, TinyDraft(), num_workers=1, options=SeedOptions(k_config=(1, 1, 1)))
    yield ex
    ex.close()


def on_call(monkeypatch, owner, name: str, action, at: int = 1) -> None:
    """Run action() just before the `at`-th call of owner.name (a real point of the run)."""
    original = getattr(owner, name)
    calls = [0]

    def wrapper(*args, **kwargs):
        calls[0] += 1
        if calls[0] == at:
            action()
        return original(*args, **kwargs)

    monkeypatch.setattr(owner, name, wrapper)


# ----------------------------------------------------------------------------- before any process


@pytest.mark.parametrize(
    "kwargs, error",
    [
        (dict(k_config=(2, 0, 1)), ConfigError),
        (dict(k_config="2,x"), ConfigError),
        (dict(discipline="lifo"), ConfigError),
        (dict(max_depth=0, adaptive_k=True), ConfigError),
        (dict(num_workers=0), ConfigError),
        (dict(draft=NamedDraft("/nonexistent/draft-model")), ModelNotFoundError),
        (dict(draft=TinyDraft(vocab_size=8)), TokenizerMismatchError),  # no tokenizer vs the byte tokenizer
    ],
)
def test_configuration_errors_raise_before_any_process(target, kwargs, error, no_stray_workers):
    draft = kwargs.pop("draft", TinyDraft())
    with pytest.raises(error) as info:
        SeedExecutor(target, draft, **kwargs)
    assert str(info.value).endswith(".") and "\n" not in str(info.value)
    no_stray_workers()


def test_empty_prompt_is_refused_before_spawning(target, no_stray_workers):
    executor = SeedExecutor(target, TinyDraft(), num_workers=1)
    with pytest.raises(ConfigError):
        executor.run([GenerationRequest([], DecodeConfig())])
    assert executor.worker_pids == []
    no_stray_workers()


# ----------------------------------------------------------------------------- worker faults


def test_killed_worker_fails_fast(executor, monkeypatch, no_stray_workers):
    executor.start()
    pids = executor.worker_pids
    killed_at = []

    def kill():
        killed_at.append(time.monotonic())
        os.kill(pids[0], signal.SIGKILL)

    on_call(monkeypatch, seed_verifier.SeedSession, "_verify", kill, at=3)
    with pytest.raises(WorkerError, match=r"Draft worker 0 .*killed by signal 9"):
        executor.run(long_requests())
    assert time.monotonic() - killed_at[0] < 10.0
    no_stray_workers(pids)


def test_raising_worker_fails_with_its_message_then_recovers(executor, no_stray_workers):
    executor.options = SeedOptions(k_config=(1, 1, 1), inject_fault="draft:3")
    with pytest.raises(WorkerError, match="injected fault at draft 3"):
        executor.run(long_requests())
    assert executor.worker_pids == []
    no_stray_workers()
    # the next run starts fresh workers and works
    executor.options = SeedOptions(k_config=(1, 1, 1))
    result = executor.run([GenerationRequest(list(b"ok "), DecodeConfig(max_new_tokens=5))])
    assert len(result[0].token_ids) == 5


@pytest.mark.parametrize("where", ["_verify", "_collect"])
def test_keyboard_interrupt_stops_every_worker(executor, monkeypatch, no_stray_workers, where):
    """Ctrl-C in the middle of a run (during a verification, or while waiting for drafts) raises
    KeyboardInterrupt out of run() and leaves no worker behind."""
    executor.start()
    pids = executor.worker_pids
    on_call(monkeypatch, seed_verifier.SeedSession, where, _thread.interrupt_main, at=3)
    with pytest.raises(KeyboardInterrupt):
        executor.run(long_requests())
    no_stray_workers(pids)


def test_keyboard_interrupt_while_a_worker_hangs(executor, monkeypatch, no_stray_workers):
    """The verifier blocked on a silent worker still answers a real Ctrl-C (SIGINT) at once."""
    # a lost SIGINT ends in a WorkerError after the stall timeout, never in a hung test
    executor.options = SeedOptions(k_config=(1, 1, 1), inject_fault="hang:2", stall_timeout_s=120)
    executor.start()
    pids = executor.worker_pids
    send_sigint = lambda: threading.Thread(target=os.kill, args=(os.getpid(), signal.SIGINT)).start()
    # the 2nd wait is for the worker's 2nd draft, which never comes: SIGINT lands before or
    # during that wait, and either way must surface as KeyboardInterrupt
    on_call(monkeypatch, seed_pool, "wait_for", send_sigint, at=2)
    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        executor.run(long_requests(1))
    assert time.monotonic() - started < 60
    no_stray_workers(pids)


def test_keyboard_interrupt_while_closing_is_raised_after_every_worker_is_reaped(
    executor, monkeypatch, no_stray_workers
):
    executor.start()
    pids = executor.worker_pids
    on_call(monkeypatch, seed_pool, "reap", _thread.interrupt_main, at=1)
    with pytest.raises(KeyboardInterrupt):
        executor.close()
    no_stray_workers(pids)


def test_held_interrupts_delivers_a_held_ctrl_c_on_exit():
    reached_end = []
    with pytest.raises(KeyboardInterrupt):
        with seed_pool.held_interrupts():
            signal.raise_signal(signal.SIGINT)
            reached_end.append(True)
    assert reached_end == [True]


def test_worker_failing_to_load_raises_at_start(target, no_stray_workers):
    with SeedExecutor(target, TinyDraft(), num_workers=1, inject_fault="load") as executor:
        started = time.monotonic()
        with pytest.raises(WorkerError, match="injected fault while loading"):
            executor.run([GenerationRequest(list(b"x"), DecodeConfig(max_new_tokens=2))])
        assert time.monotonic() - started < 120
    no_stray_workers()


def test_close_and_context_manager_stop_workers(executor, no_stray_workers):
    with executor:
        executor.run([GenerationRequest(list(b"hi "), DecodeConfig(max_new_tokens=4))])
        pids = executor.worker_pids
        assert len(pids) == 1
    no_stray_workers(pids)
    executor.close()  # idempotent


SCRIPT = textwrap.dedent(
    """
    import sys
    from seed_tot.config import DecodeConfig
    from seed_tot.models.tiny import build_tiny_pair
    from seed_tot.runtime import ModelRunner
    from seed_tot.requests import GenerationRequest
    from seed_tot.scheduling.seed import SeedExecutor
    from seed_tot.scheduling.seed.worker import TinyDraft

    if __name__ == "__main__":
        _, target, tokenizer = build_tiny_pair()
        executor = SeedExecutor(ModelRunner(target, tokenizer), TinyDraft(), num_workers=1)
        executor.run([GenerationRequest(list(b"hi "), DecodeConfig(max_new_tokens=3))])
        print(" ".join(map(str, executor.worker_pids)), flush=True)
        if sys.argv[1] == "exit":
            raise SystemExit("leaving without close()")
        import time
        time.sleep(600)  # killed by the test
    """
)


@pytest.mark.parametrize("how", ["exit", "sigkill"])
def test_no_orphans_after_the_parent_exits_or_is_killed(tmp_path, how):
    script = tmp_path / "parent.py"
    script.write_text(SCRIPT)
    parent = subprocess.Popen(
        [sys.executable, str(script), how], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        line = parent.stdout.readline()
        worker_pids = [int(p) for p in line.split()]
        assert len(worker_pids) == 1, parent.stderr.read()
        if how == "sigkill":
            parent.kill()
        parent.wait(timeout=60)
        deadline = time.monotonic() + 10.0
        while time.monotonic() < deadline and alive(worker_pids[0]):
            time.sleep(0.1)
        assert not alive(worker_pids[0]), f"worker {worker_pids[0]} outlived its parent"
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
