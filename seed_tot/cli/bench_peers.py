"""Compare engines fairly: the same GSM8K problems, the same chains and prompts, one system at a time.

The work is GSM8K's CLI default chains (self-consistency): per problem the target's greedy chain of
thought and 4 sampled ones (temperature/top-p of the thoughts, one seed per request), voting plainly
(`--vote-weight leaf`: the default's learned judge runs beside the engine, not in it). Systems:

  a  `seed-tot gsm8k` with its defaults (the in-process batched-lookup executor)
  b  llama.cpp's server from the xllamacpp wheel, started here and tuned for the work (slots = rows in
     flight = problems at once x chains, threads = cores available, prompt cache on, context per slot
     = longest prompt + the chain budget), fed by a small client in this script: the requests are the
     ones the package's own search asks for (same prompt token ids, seeds, temperatures, top-p, token
     budget, stop strings), and the answer comes from the package's vote
  c  `seed-tot gsm8k --method llama-cpp --server-parallel <rows in flight>`
  d  `seed-tot gsm8k --method hf-generate`: transformers' generate() on the in-process target, one
     request after another (the usual baseline; slow: --generate-limit N runs it on the first N
     problems only, and the summary marks it)
  e  `seed-tot gsm8k --int8`: a with the target's linear layers int8 (lossy: its chains may differ)

Each system runs alone in a child process, measured from outside: wall seconds, peak RSS of its
process tree (llama.cpp's server included), load average before and after. Writes OUT/<system>/
(the run's files, log.txt, measure.json), OUT/summary.json and OUT/summary.md.

    seed-tot bench --peers --limit 20 --concurrency 16 --out runs/peers      # the default against llama.cpp
    seed-tot bench --peers --limit 10 --systems a,b,c,d --generate-limit 2 --out runs/engine-peers
    seed-tot bench --peers --tiny --limit 2 --threads 1 --out peers-smoke   # smoke test

(scripts/engine_peers.py runs the same harness, for the commands stored with earlier results.)
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sys
import time
from pathlib import Path

import click

from seed_tot.cli.bench_peers_llama import worker_b
from seed_tot.cli.bench_peers_work import answer_pace, chain_settings, cli_args, default_data, plan_for
from seed_tot.observe.side_by_side import cores_available, markdown_table, run_measured
from seed_tot.records import portable_command, portable_path, read_stored_text, stored_files
from seed_tot.machine_facts import cpu_facts

SYSTEMS = {
    "a": "seed-tot gsm8k (in-process default)",
    "b": "llama.cpp server, tuned, harness client",
    "c": "seed-tot gsm8k --method llama-cpp",
    "d": "seed-tot gsm8k --method hf-generate (transformers generate())",
    "e": "seed-tot gsm8k --int8 (in-process, int8 linear layers: lossy)",
}


# ---------------------------------------------------------------- systems a and c: the CLI as a child

def read_cli_run(run_dir: Path) -> dict:
    """Totals of a `seed-tot gsm8k` run from its results.jsonl, runs.jsonl and first trace."""
    results = [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines() if line.strip()]
    runs = [json.loads(line) for line in (run_dir / "runs.jsonl").read_text().splitlines() if line.strip()]
    last = runs[-1] if runs else {}
    tokens = sum(r["new_tokens"] for r in results)
    engine, config = None, {}
    traces = stored_files(run_dir / "traces", "*.json", recursive=False)
    if traces:
        config = json.loads(read_stored_text(traces[0])).get("config", {})
        engine = config.get("engine")
    wall = last.get("wall_seconds")
    return {
        "per_problem": [{k: r.get(k) for k in ("problem_id", "answer", "gold", "correct", "new_tokens")} for r in results],
        "problems": len(results), "correct": sum(bool(r["correct"]) for r in results), "new_tokens": tokens,
        "run_wall_s": wall, "tokens_per_s": round(tokens / wall, 2) if wall else None,
        **answer_pace(len(results), wall, [r.get("finished_after_s") for r in results]),
        "method": last.get("method"), "dtype": last.get("dtype"), "concurrency": last.get("concurrency"),
        "driver_peak_rss_mib": last.get("peak_rss_mib"), "engine": engine,
        "executor_settings": {k: v for k, v in config.items() if k not in ("engine",)} if config else None,
    }


SHARED_MACHINE = 0.25  # other processes' share of the cores above which a system's times are flagged
CLI_SYSTEMS = ("a", "c", "d", "e")  # systems that are a `seed-tot gsm8k` run


def cli_command(spec: dict, system: str, out: Path) -> list[str]:
    limit = spec.get("generate_limit") if system == "d" else None
    command = [sys.executable, "-m", "seed_tot", "gsm8k", *cli_args(spec, limit), "--out", str(out / "run")]
    if system == "c":
        command += ["--method", "llama-cpp", "--server-parallel", str(spec["rows"])]
    if system == "d":
        command += ["--method", "hf-generate"]
    if system == "e":
        command += ["--int8"]
    return command


# ---------------------------------------------------------------- the harness

def run_system(system: str, spec: dict, out_root: Path) -> dict:
    out = out_root / system
    out.mkdir(parents=True)
    if system in CLI_SYSTEMS:
        command = cli_command(spec, system, out)
    else:
        # the worker runs in the working directory: the data file named from there
        (out / "spec.json").write_text(json.dumps({**spec, "data": portable_path(spec["data"])}, indent=1))
        command = [sys.executable, "-m", "seed_tot.cli.bench_peers", "--worker", system, "--out", str(out)]
    click.echo(f"[{system}] {SYSTEMS[system]}: {shlex.join(command)}")
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    measured = run_measured(command, out / "log.txt", env=env)
    row = {"system": system, "label": SYSTEMS[system], "command": portable_command(command), **measured}
    try:
        if measured["returncode"] != 0:
            raise RuntimeError(f"exit code {measured['returncode']}")
        if system in CLI_SYSTEMS:
            found = read_cli_run(out / "run")
            found["threads"] = (found.get("engine") or {}).get("threads", spec["threads"])
            found["slots"] = (found.get("engine") or {}).get("slots") if system == "c" else None
            found["chains"] = spec["chains"]
        else:
            found = json.loads((out / "worker.json").read_text())
        row.update(found)
    except (OSError, ValueError, KeyError, RuntimeError) as exc:
        row["error"] = str(exc)
        row["log_tail"] = (out / "log.txt").read_text(errors="replace")[-2000:]
        click.echo(f"[{system}] failed ({exc}); see {out / 'log.txt'}", err=True)
    (out / "measure.json").write_text(json.dumps(row, indent=1))
    click.echo(f"[{system}] {row.get('correct')}/{row.get('problems')} correct, {row.get('new_tokens')} tokens, "
               f"run {row.get('run_wall_s')} s, process {row['process_wall_s']} s, peak RSS {row['peak_rss_mib']} MiB")
    return row


def answers_table(rows: list[dict], problem_ids: list[str]) -> list[str]:
    """Markdown lines: each problem's gold answer and every system's answer (* = correct)."""
    found = {row["system"]: {p["problem_id"]: p for p in row.get("per_problem") or []} for row in rows}
    lines = ["| problem | gold | " + " | ".join(row["system"] for row in rows) + " |",
             "|---|---|" + "---|" * len(rows)]
    for problem_id in problem_ids:
        gold = next((found[r["system"]][problem_id]["gold"] for r in rows if problem_id in found[r["system"]]), "-")
        cells = []
        for row in rows:
            record = found[row["system"]].get(problem_id)
            cells.append("-" if record is None else f"{record['answer']}{' *' if record['correct'] else ''}")
        lines.append(f"| {problem_id} | {gold} | " + " | ".join(cells) + " |")
    return [*lines, "", "(* = correct)", ""]


PEER_OPTIONS = [
    click.option("--data", default=None, help="GSM8K jsonl file (default: the bundled test split)."),
    click.option("--start", type=int, default=0, show_default=True, help="Index of the first problem."),
    click.option("--limit", type=int, default=10, show_default=True, help="Number of problems."),
    click.option("--systems", default="a,b", show_default=True, help="Comma-separated: a (seed-tot gsm8k default), "
                 "b (tuned llama.cpp + harness client), c (seed-tot gsm8k --method llama-cpp), d (seed-tot gsm8k "
                 "--method hf-generate: transformers generate(), one request after another; slow), e (seed-tot gsm8k "
                 "--int8: int8 linear layers, lossy)."),
    click.option("--generate-limit", type=int, default=None, help="Run system d on the first N problems only "
                 "(default: all of them); the summary marks a system that ran on fewer problems."),
    click.option("--concurrency", type=int, default=4, show_default=True, help="Problems at once, the same for every system."),
    click.option("--threads", type=int, default=None, help="Threads of every system (torch's, llama.cpp's). Default: the cores available."),
    click.option("--out", "out_dir", default="runs/engine-peers", show_default=True, type=click.Path(file_okay=False)),
    click.option("--tiny", is_flag=True, help="The tiny random-weight pair (smoke test; answers are gibberish)."),
    click.option("--force", is_flag=True, help="Delete OUT/<system> folders left by an earlier run first."),
]


def peer_options(f):
    for option in reversed(PEER_OPTIONS):
        f = option(f)
    return f


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@peer_options
@click.option("--worker", type=click.Choice(["b"]), default=None, hidden=True)
def main(data, start, limit, systems, generate_limit, concurrency, threads, out_dir, tiny, force, worker):
    """Run GSM8K's default chains-of-thought vote through several engines, one after another, and
    compare wall time, tokens/s, problems/hour, time to the first answer, accuracy and peak memory
    (OUT/summary.md, OUT/summary.json)."""
    if worker is not None:  # inside the child process of system b
        out = Path(out_dir)
        spec = json.loads((out / "spec.json").read_text())
        found = worker_b(spec, out)
        (out / "worker.json").write_text(json.dumps(found, indent=1))
        return
    run_peers(data, start, limit, systems, generate_limit, concurrency, threads, out_dir, tiny, force)


def run_peers(data, start, limit, systems, generate_limit, concurrency, threads, out_dir, tiny, force) -> None:
    out_root = Path(out_dir)
    chosen = [s.strip() for s in systems.split(",") if s.strip()]
    unknown = [s for s in chosen if s not in SYSTEMS]
    if unknown or not chosen:
        raise click.BadParameter(f"unknown system(s) {unknown}: choose from {', '.join(SYSTEMS)}", param_hint="--systems")
    if limit < 1 or concurrency < 1 or (generate_limit is not None and generate_limit < 1):
        raise click.BadParameter("--limit, --concurrency and --generate-limit must be at least 1")
    command_line = portable_command([sys.executable, *sys.argv])
    data_path = Path(data) if data else default_data()
    spec = {"data": str(data_path.resolve()), "start": start, "limit": limit,
            "concurrency": concurrency, "threads": threads or cores_available(), "tiny": tiny,
            "generate_limit": min(generate_limit, limit) if generate_limit else None}
    for system in chosen:
        if (out_root / system).exists():
            if not force:
                raise click.UsageError(f"{out_root / system} exists: choose another --out, or pass --force to replace it.")
            shutil.rmtree(out_root / system)
    out_root.mkdir(parents=True, exist_ok=True)
    plan = plan_for(spec, "llama-cpp", out_root / "_plan")  # no model loads: the settings and problems only
    spec["chains"] = chain_settings(plan.search_config)
    spec["rows"] = min(concurrency, len(plan.todo)) * spec["chains"]["chains"]
    spec["problem_ids"] = [p.id for p in plan.todo]
    spec["data_file"] = plan.data_file
    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    rows = [run_system(system, spec, out_root) for system in chosen]
    summary = {
        "command": command_line, "started_utc": started, "finished_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "cores_available": cores_available(), "cpu_count": os.cpu_count(), "cpu": cpu_facts(), "host": os.uname().nodename,
        "problems": spec["problem_ids"], "data_file": spec["data_file"], "concurrency": concurrency,
        "rows_in_flight": spec["rows"], "threads": spec["threads"], "tiny": tiny, "chains": spec["chains"],
        "generate_limit": spec["generate_limit"], "systems": rows,
    }
    (out_root / "summary.json").write_text(json.dumps(summary, indent=1))
    notes = [
        f"# Engine peers: GSM8K problems {start}..{start + len(spec['problem_ids']) - 1}", "",
        f"Command: `{command_line}`", "",
        f"Started {started}, {cores_available()} cores available ({summary['cpu']['model']}; "
        f"{' '.join(summary['cpu']['vector_flags']) or 'no vector flags read'}), {concurrency} problems at once, "
        f"{spec['rows']} rows in flight, {spec['chains']['chains']} chains per problem (greedy + sampled, voting).", "",
        markdown_table(rows, len(spec["problem_ids"])),
        "wall: run = from the first request to the last answer (models loaded); process = the whole child process. "
        "tokens/s = new tokens / run wall. peak RSS: the child's process tree, summed (llama.cpp's server included). "
        "load: 1-minute load average before / after.", "",
    ]
    notes += answers_table(rows, spec["problem_ids"])
    notes += [f"Note: other processes held {row['other_work_share']:.0%} of the cores while system {row['system']} ran: "
              "the machine was shared, so its times are not those of a quiet machine.\n"
              for row in rows if (row.get("other_work_share") or 0) > SHARED_MACHINE]
    notes += [f"- {row['system']}: `{row['command']}`" + (f" (FAILED: {row['error']}; see {row['log']})" if "error" in row else "")
              for row in rows]
    (out_root / "summary.md").write_text("\n".join(notes) + "\n")
    click.echo(markdown_table(rows, len(spec["problem_ids"])))
    click.echo(f"wrote {out_root / 'summary.json'} and {out_root / 'summary.md'}")
    if any("error" in row for row in rows):
        sys.exit(1)


if __name__ == "__main__":
    main()
