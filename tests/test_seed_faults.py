"""SEED failure paths: configuration errors raise before any process starts; a worker that is
killed or raises makes run() fail fast with its message; no process outlives any exit path."""

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

from seed_tot.config import DecodeConfig
from seed_tot.errors import ConfigError, ModelNotFoundError, TokenizerMismatchError, WorkerError
from seed_tot.scheduling.requests import GenerationRequest
from seed_tot.scheduling.seed import SeedExecutor, SeedOptions
from seed_tot.scheduling.worker import NamedDraft, TinyDraft

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


def our_children() -> list[int]:
    """Child processes of this test process, except multiprocessing's own resource tracker
    (started by the first spawn and shared by the whole interpreter, not a worker)."""
    tracker = getattr(resource_tracker._resource_tracker, "_pid", None)
    return [pid for pid in children_of(os.getpid()) if pid != tracker]


def assert_no_workers_left(pids: list[int]) -> None:
    deadline = time.monotonic() + 5.0
    while time.monotonic() < deadline and (multiprocessing.active_children() or our_children()):
        time.sleep(0.05)
    assert multiprocessing.active_children() == []
    assert our_children() == []
    for pid in pids:
        assert not alive(pid), pid


def long_requests(n: int = 2) -> list[GenerationRequest]:
    return [GenerationRequest(list(b"a long generation "), DecodeConfig(max_new_tokens=3000), seed=i) for i in range(n)]


@pytest.fixture
def target(tiny_pair):
    return tiny_pair[1]


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
def test_configuration_errors_raise_before_any_process(target, kwargs, error):
    draft = kwargs.pop("draft", TinyDraft())
    with pytest.raises(error) as info:
        SeedExecutor(target, draft, **kwargs)
    assert str(info.value).endswith(".") and "\n" not in str(info.value)
    assert multiprocessing.active_children() == [] and our_children() == []


def test_empty_prompt_is_refused_before_spawning(target):
    executor = SeedExecutor(target, TinyDraft(), num_workers=1)
    with pytest.raises(ConfigError):
        executor.run([GenerationRequest([], DecodeConfig())])
    assert executor.worker_pids == [] and our_children() == []


# ----------------------------------------------------------------------------- worker faults


@pytest.fixture(scope="module")
def executor(tiny_pair):
    ex = SeedExecutor(tiny_pair[1], TinyDraft(), num_workers=1, options=SeedOptions(k_config=(1, 1, 1)))
    yield ex
    ex.close()


def test_killed_worker_fails_fast(executor):
    executor.options = SeedOptions(k_config=(1, 1, 1))
    executor.start()
    pids = executor.worker_pids
    killed_at = []

    def kill():
        killed_at.append(time.monotonic())
        os.kill(pids[0], signal.SIGKILL)

    threading.Timer(0.5, kill).start()
    with pytest.raises(WorkerError, match=r"Draft worker 0 .*killed by signal 9"):
        executor.run(long_requests())
    assert time.monotonic() - killed_at[0] < 10.0
    assert_no_workers_left(pids)


def test_raising_worker_fails_with_its_message_then_recovers(executor, tiny_pair):
    executor.options = SeedOptions(k_config=(1, 1, 1), inject_fault="draft:3")
    with pytest.raises(WorkerError, match="injected fault at draft 3"):
        executor.run(long_requests())
    pids = executor.worker_pids
    assert pids == []
    assert_no_workers_left(pids)
    # the next run starts fresh workers and works
    executor.options = SeedOptions(k_config=(1, 1, 1))
    result = executor.run([GenerationRequest(list(b"ok "), DecodeConfig(max_new_tokens=5))])
    assert len(result[0].token_ids) == 5


def test_keyboard_interrupt_stops_every_worker(executor):
    executor.options = SeedOptions(k_config=(1, 1, 1))
    executor.start()
    pids = executor.worker_pids
    threading.Timer(0.5, _thread.interrupt_main).start()
    with pytest.raises(KeyboardInterrupt):
        executor.run(long_requests())
    assert_no_workers_left(pids)


def test_worker_failing_to_load_raises_at_start(target):
    with SeedExecutor(target, TinyDraft(), num_workers=1, inject_fault="load") as executor:
        started = time.monotonic()
        with pytest.raises(WorkerError, match="injected fault while loading"):
            executor.run([GenerationRequest(list(b"x"), DecodeConfig(max_new_tokens=2))])
        assert time.monotonic() - started < 120
    assert_no_workers_left([])


def test_close_and_context_manager_stop_workers(executor):
    executor.options = SeedOptions(k_config=(1, 1, 1))
    with executor:
        executor.run([GenerationRequest(list(b"hi "), DecodeConfig(max_new_tokens=4))])
        pids = executor.worker_pids
        assert len(pids) == 1
    assert_no_workers_left(pids)
    executor.close()  # idempotent


SCRIPT = textwrap.dedent(
    """
    import sys
    from seed_tot.config import DecodeConfig
    from seed_tot.models.tiny import build_tiny_pair
    from seed_tot.runtime import ModelRunner
    from seed_tot.scheduling.requests import GenerationRequest
    from seed_tot.scheduling.seed import SeedExecutor
    from seed_tot.scheduling.worker import TinyDraft

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
