"""Measuring systems side by side (scripts/engine_peers.py): run one system as a child process and
record its wall time, its peak memory (the child and every process it starts, summed) and the load
average around it; the chains-of-thought requests of a search with any client; the summary table.
"""

from __future__ import annotations

import os
import resource
import subprocess
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

from seed_tot.machine_facts import OtherWork
from seed_tot.requests import GenerationRequest, GenerationResult
from seed_tot.search.steps import Steps, drive

MIB = 2**20


def cores_available() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def load_average() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def _tree_rss(root) -> tuple[int, int]:
    """(RSS of `root` and all its descendants summed, the largest single RSS), in bytes."""
    import psutil

    try:
        processes = [root, *root.children(recursive=True)]
    except psutil.Error:
        return 0, 0
    sizes = []
    for process in processes:
        try:
            sizes.append(process.memory_info().rss)
        except psutil.Error:  # exited between the listing and the read
            pass
    return sum(sizes), max(sizes, default=0)


def run_measured(argv: Sequence[str], log_path: Path, env: dict | None = None, cwd: str | Path | None = None,
                 poll_s: float = 0.2) -> dict:
    """Run `argv` to its end (output to `log_path`) and measure it: wall seconds, peak RSS of the
    process tree (polled every `poll_s`; llama.cpp's server is a process the child starts, so it
    counts), the largest single process's RSS, the children's ru_maxrss once reaped, load average
    before and after."""
    import psutil

    load_before, other_work = load_average(), OtherWork()
    maxrss_before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    peak_sum = peak_one = 0
    started = time.perf_counter()
    with open(log_path, "wb") as log:
        child = subprocess.Popen(list(argv), stdout=log, stderr=subprocess.STDOUT, env=env, cwd=cwd)
        root = psutil.Process(child.pid)
        try:
            while True:
                total, largest = _tree_rss(root)
                peak_sum, peak_one = max(peak_sum, total), max(peak_one, largest)
                try:
                    child.wait(timeout=poll_s)
                    break
                except subprocess.TimeoutExpired:
                    pass
        except BaseException:
            child.kill()
            child.wait()
            raise
    wall = time.perf_counter() - started
    maxrss_after = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return {
        "argv": list(argv),
        "returncode": child.returncode,
        "process_wall_s": round(wall, 2),
        "peak_rss_mib": round(peak_sum / MIB, 1),
        "peak_rss_largest_process_mib": round(peak_one / MIB, 1),
        # the largest ru_maxrss of any reaped descendant so far; None when this run did not raise it
        "ru_maxrss_children_mib": round(maxrss_after / 1024, 1) if maxrss_after > maxrss_before else None,
        "load_before": load_before,
        "load_after": load_average(),
        # other processes' share of the cores meanwhile (the child's own CPU counted once it is reaped)
        "other_work_share": other_work.share(os.cpu_count() or 1),
        "log": str(log_path),
    }


class FunctionExecutor:
    """An executor made of a function from a batch of requests to their results."""

    name = "function"

    def __init__(self, run_batch: Callable[[list[GenerationRequest]], list[GenerationResult]]):
        self.run = run_batch

    def close(self) -> None:
        pass


def drive_problem(steps: Steps, run_batch: Callable[[list[GenerationRequest]], list[GenerationResult]]):
    """Run one search's step generator to its end (forks included), each batch through `run_batch`."""
    return drive(steps, FunctionExecutor(run_batch))


def solve_concurrently(steps_of: Callable, problems: list, generate: Callable[[GenerationRequest], GenerationResult],
                       concurrency: int, rows: int):
    """Yield each problem's search result as it finishes; `concurrency` problems at once, each batch's
    requests sent one per thread (`generate`), up to `rows` requests in flight in all."""
    with ThreadPoolExecutor(max_workers=rows) as request_pool, ThreadPoolExecutor(max_workers=concurrency) as problem_pool:
        def run_batch(requests: list[GenerationRequest]) -> list[GenerationResult]:
            return list(request_pool.map(generate, requests))

        futures = [problem_pool.submit(drive_problem, steps_of(problem), run_batch) for problem in problems]
        for future in as_completed(futures):
            yield future.result()


FEWER_MARK = "†"


def ran_on_fewer(row: dict, problems: int | None) -> bool:
    return problems is not None and row.get("problems") is not None and row["problems"] < problems


def markdown_table(rows: list[dict], problems: int | None = None) -> str:
    """The summary table: one line per system. A system that answered fewer than `problems`
    problems is marked, and a line under the table says so: its totals cover fewer problems."""
    lines = [
        "| system | wall s (run / process) | new tokens | tokens/s | problems/hour | first answer s | correct | peak RSS MiB "
        "| threads | slots | load before / after |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]

    def num(value, fmt="{:.1f}"):
        return "-" if value is None else fmt.format(value)

    for row in rows:
        load = f"{num((row.get('load_before') or [None])[0], '{:.2f}')} / {num((row.get('load_after') or [None])[0], '{:.2f}')}"
        correct = "-" if row.get("correct") is None else f"{row['correct']}/{row.get('problems')}"
        if ran_on_fewer(row, problems):
            correct += f" {FEWER_MARK}"
        lines.append(
            f"| {row['system']}: {row.get('label', '')} | {num(row.get('run_wall_s'))} / {num(row.get('process_wall_s'))} "
            f"| {num(row.get('new_tokens'), '{:,}')} | {num(row.get('tokens_per_s'), '{:.2f}')} "
            f"| {num(row.get('problems_per_hour'))} | {num(row.get('first_answer_s'))} | {correct} "
            f"| {num(row.get('peak_rss_mib'), '{:,.0f}')} | {num(row.get('threads'), '{}')} | {num(row.get('slots'), '{}')} | {load} |"
        )
    if any(ran_on_fewer(row, problems) for row in rows):
        lines += ["", f"{FEWER_MARK} ran on the first problems only, not all {problems}: its wall time, tokens and "
                      "correct answers cover those problems."]
    return "\n".join(lines) + "\n"
