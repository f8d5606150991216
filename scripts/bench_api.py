"""Throughput of `seed-tot api` against the CLI on the same GSM8K problems at the same concurrency.

For each level C (default 1, 4, 16), one after another:
- CLI: `seed-tot gsm8k --limit N --concurrency C --search S --out OUT/cli-C ...`; its speed is read from
  OUT/cli-C/runs.jsonl (the run's own clock: model loading excluded);
- API: `seed-tot api --concurrency C --out OUT/api-C ...` started on a free port, the same N questions
  sent by C client threads (each with seed 0, the CLI's run seed), timed from the first request sent
  to the last reply (model loading excluded); then the server is stopped with SIGTERM.
Both get the arguments after `--` unchanged (e.g. --depth 2 --max-new-tokens 64), so the trees have the
same settings. Every request seed derives from the run seed and the problem's id, and an API problem's
id is derived from its text; so the CLI reads the problems from OUT/problems.jsonl, where each row
carries the id the API gives its text. Both then grow the same trees (the batched executors' tokens do
not depend on which rows share a forward): the table checks that the two made the same tokens and
answers, so the time between them is the serving's own cost.

  python scripts/bench_api.py --limit 16 --levels 1,4,16 --out runs/bench_api -- --depth 2 --threads 2
  python scripts/bench_api.py --tiny --limit 4 --levels 1,2 --out /tmp/bench_api_tiny -- --max-new-tokens 8

Pass the same --threads to both (after `--`) on a busy machine: torch's default (every core) makes a
process that shares its cores with other work far slower, and the CLI's main thread and the API's
driver thread may not be hit alike (on this 2-core machine under a load of 7, one tiny-pair CLI problem
took 69.6 s with 2 threads and 3.8 s with OMP_NUM_THREADS=1).

Prints a table (requests per minute, tokens/s) and writes OUT/bench_api.json.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import click
import httpx

from seed_tot.records import write_text_atomically
from seed_tot.machine_facts import machine_facts

SEED_TOT = [sys.executable, "-m", "seed_tot"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def write_problems(path: Path, problems: list) -> None:
    """The problems as a data file whose ids are the ones the API derives from their text."""
    from seed_tot.cli.api_server.problems import problem_id

    rows = [{"id": problem_id("gsm8k", p.question.strip()), "question": p.question, "answer": p.gold}
            for p in problems]
    write_text_atomically(path, "".join(json.dumps(row) + "\n" for row in rows))


def run_cli(out: Path, data: Path, concurrency: int, search: str, common: list[str]) -> dict:
    command = [*SEED_TOT, "gsm8k", "--data", str(data), "--concurrency", str(concurrency), "--search", search,
               "--out", str(out), *common]
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    totals = json.loads((out / "runs.jsonl").read_text().splitlines()[-1])
    answers = {}
    for line in (out / "results.jsonl").read_text().splitlines():
        record = json.loads(line)
        answers[record["problem_id"]] = record["answer"]
    return {"wall_seconds": totals["wall_seconds"], "new_tokens": totals["new_tokens"], "requests": len(answers),
            "answers": answers}


def wait_ready(url: str, process: subprocess.Popen, timeout: float = 900.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise click.ClickException(f"seed-tot api exited with code {process.returncode} before it was ready.")
        try:
            if httpx.get(url + "/health", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.5)
    raise click.ClickException(f"seed-tot api was not ready within {timeout:.0f} s.")


def run_api(out: Path, questions: list[str], concurrency: int, search: str, common: list[str]) -> dict:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    command = [*SEED_TOT, "api", "--port", str(port), "--concurrency", str(concurrency), "--out", str(out), *common]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_ready(url, process)

        def ask(question: str) -> tuple[int, str]:
            reply = httpx.post(url + "/v1/chat/completions", timeout=None, json={
                "model": f"gsm8k/{search}", "messages": [{"role": "user", "content": question}], "seed": 0})
            reply.raise_for_status()
            body = reply.json()
            return body["usage"]["completion_tokens"], body["seed_tot"]["problem_id"], body["seed_tot"]["answer"]

        started = time.perf_counter()
        with ThreadPoolExecutor(max_workers=concurrency) as pool:
            replies = list(pool.map(ask, questions))
        wall = time.perf_counter() - started
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(120)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    return {"wall_seconds": round(wall, 1), "new_tokens": sum(tokens for tokens, _, _ in replies),
            "requests": len(questions), "answers": {pid: answer for _, pid, answer in replies},
            "exit_code": process.returncode}


def speeds(row: dict) -> dict:
    wall = row["wall_seconds"]
    return {**row, "requests_per_minute": round(60 * row["requests"] / wall, 2) if wall else None,
            "tokens_per_second": round(row["new_tokens"] / wall, 2) if wall else None}


@click.command(help=__doc__)
@click.option("--limit", default=16, show_default=True, help="GSM8K problems (the first N of the test split).")
@click.option("--levels", default="1,4,16", show_default=True, help="Concurrency levels, comma-separated.")
@click.option("--search", default="self-consistency", show_default=True, help="The search of both (the model id's).")
@click.option("--tiny", is_flag=True, help="The tiny random-weight pair (a smoke test of this script).")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), required=True, help="A new folder.")
@click.argument("run_args", nargs=-1, type=click.UNPROCESSED)
def main(limit: int, levels: str, search: str, tiny: bool, out: Path, run_args: tuple[str, ...]) -> None:
    from seed_tot_tasks import get_task

    try:
        level_list = [int(part) for part in levels.split(",") if part.strip()]
    except ValueError:
        raise click.ClickException(f"Bad --levels {levels!r}: write numbers, e.g. 1,4,16.") from None
    if not level_list or min(level_list) < 1 or limit < 1:
        raise click.ClickException("--levels and --limit must be positive.")
    if out.exists() and any(out.iterdir()):
        raise click.ClickException(f"{out} is not empty: choose a new --out folder.")
    out.mkdir(parents=True, exist_ok=True)
    common = [*(["--tiny"] if tiny else []), *run_args]
    problems = get_task("gsm8k").load()[:limit]
    questions = [problem.question for problem in problems]
    data = out / "problems.jsonl"
    write_problems(data, problems)
    rows = []
    for level in level_list:
        for way, run in (("cli", lambda: run_cli(out / f"cli-{level}", data, level, search, common)),
                         ("api", lambda: run_api(out / f"api-{level}", questions, level, search, common))):
            row = speeds({"way": way, "concurrency": level, **run()})
            rows.append(row)
            click.echo(f"{way} at concurrency {level}: {row['requests_per_minute']} requests/min, "
                       f"{row['tokens_per_second']} tokens/s ({row['new_tokens']} tokens in {row['wall_seconds']} s)")
    click.echo("\n| concurrency | CLI requests/min | API requests/min | CLI tokens/s | API tokens/s | API extra time "
               "| same tokens | same answers |")
    click.echo("|---|---|---|---|---|---|---|---|")
    for level in level_list:
        cli, api = (next(r for r in rows if r["way"] == way and r["concurrency"] == level) for way in ("cli", "api"))
        extra = api["wall_seconds"] / cli["wall_seconds"] - 1 if cli["wall_seconds"] else float("nan")
        same = sum(cli["answers"].get(pid) == answer for pid, answer in api["answers"].items())
        click.echo(f"| {level} | {cli['requests_per_minute']} | {api['requests_per_minute']} | "
                   f"{cli['tokens_per_second']} | {api['tokens_per_second']} | {extra:+.1%} | "
                   f"{'yes' if cli['new_tokens'] == api['new_tokens'] else 'no'} | {same} of {len(api['answers'])} |")
    record = {"limit": limit, "search": search, "tiny": tiny, "run_args": list(run_args), "rows": rows,
              "machine": machine_facts(), "load_average": os.getloadavg()}
    write_text_atomically(out / "bench_api.json", json.dumps(record, indent=2))
    click.echo(f"wrote {out / 'bench_api.json'}")


if __name__ == "__main__":
    main()
