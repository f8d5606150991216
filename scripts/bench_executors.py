"""Executors side by side on the real default pair: serial AR/SD/MCSD, batched AR/SD, SEED.

    python scripts/bench_executors.py --new-tokens 64 --temperatures 0.2,1.0 --out results/executors

Workloads (one tree expansion each, n requests):
  thought  n requests with the SAME prompt (GSM8K thought generation, chat template), seeds 0..n-1
  value    n DIFFERENT prompts (GSM8K state evaluation "rate the new step 1-10"), one per problem
Every cell (workload x temperature x problem) runs every method once, one after another, so
methods are compared under the same machine load; speedups are per cell against serial AR,
aggregates are total new tokens / total seconds. Executors are warmed up (and SEED's workers
spawned and loaded) before timing. In-process methods run with --threads torch threads; SEED
sets its own (target 1 thread, each worker 1 thread by default). Prints a markdown table and
writes JSON, markdown and plots to --out (speedup bars, SEED schedule Gantt and target
utilization like the paper's Fig. 3b / 7a, and the scaling plot). --scaling 1,2,...,6 adds the
thought workload at those n (paper Fig. 7b) for --scaling-methods.

Every finished (cell, method) measurement is appended to --records (default OUT/records.jsonl);
a rerun with the same settings skips what is recorded, so a long run can stop and resume.
"""

from __future__ import annotations

import json
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import click
import torch


from seed_tot.config import DecodeConfig
from seed_tot.metrics import event_records
from seed_tot.models import load_pair
from seed_tot.reasoning.prompting import PromptFormatter
from seed_tot.records import RecordLog, settings_key, write_text_atomically
from seed_tot.machine_facts import load_average, machine_facts
from seed_tot.scheduling.factory import make_executor
from seed_tot.scheduling.methods import method_named
from seed_tot.requests import GenerationRequest, GenerationResult
from seed_tot_tasks.gsm8k import Gsm8kTask

# label -> (factory method, options)
CONFIGS: dict[str, tuple[str, dict]] = {
    "ar": ("ar", {}),
    "sd": ("sd", {"k": 2}),  # k=2 measured best for serial SD (docs/decoding.md)
    "mcsd": ("mcsd", {"k_config": "2,2,1"}),
    "batched": ("batched", {}),
    "batched-sd": ("batched-sd", {"k": 3}),
    "batched-sd-adaptive": ("batched-sd", {"k": 3, "adaptive_k": True}),
    "batched-mcsd": ("batched-mcsd", {"k_config": "2,2,1"}),
    "batched-lookup": ("batched-lookup", {"k": 4}),
    "batched-lookup-k2": ("batched-lookup", {"k": 2}),
    "batched-lookup-k3": ("batched-lookup", {"k": 3}),
    "batched-lookup-k2-min2": ("batched-lookup", {"k": 2, "min_ngram": 2}),
    "batched-lookup-adaptive": ("batched-lookup", {"k": 2, "adaptive_k": True, "max_k": 6}),
    "seed": ("seed", {"k": 3}),
    "seed-mcsd": ("seed-mcsd", {"k_config": "2,2,1"}),
    "seed+batched_verify": ("seed", {"k": 3, "batched_verify": True}),
    "seed+share_prefix": ("seed", {"k": 3, "share_prefix": True}),
    "seed+adaptive_k": ("seed", {"k": 3, "adaptive_k": True}),
    "seed+round-robin": ("seed", {"k": 3, "discipline": "round-robin"}),
    "seed+all": ("seed", {"k": 3, "batched_verify": True, "share_prefix": True, "adaptive_k": True}),
}
DEFAULT_METHODS = "ar,sd,mcsd,batched,batched-sd,batched-sd-adaptive,batched-mcsd,batched-lookup,seed,seed-mcsd,seed+batched_verify,seed+share_prefix,seed+adaptive_k,seed+round-robin,seed+all"


def clean_step(line: str) -> str:
    """A GSM8K gold solution line without its <<calculator>> annotations."""
    return re.sub(r"<<[^>]*>>", "", line).strip()


def thought_requests(task, formatter, problem, n: int, config: DecodeConfig) -> list[GenerationRequest]:
    ids = formatter.encode(task.thought_prompt(problem, "", 0, task.default_depth))
    return [GenerationRequest(ids, config, seed=i, request_id=f"{problem.id}/thought{i}") for i in range(n)]


def value_requests(task, formatter, problems, n: int, config: DecodeConfig) -> list[GenerationRequest]:
    """n different evaluation prompts: each rates the first gold step of a different problem."""
    requests = []
    for i, problem in enumerate(problems[:n]):
        answer_lines = [l for l in str(problem.meta.get("answer", "")).splitlines() if l and not l.startswith("####")]
        step = clean_step(answer_lines[0]) if answer_lines else "Let me compute the total first."
        state = f"Sub-question: What is the first thing to compute?\nSub-answer: {step}"
        ids = formatter.encode(task.value_prompt(problem, state, 0))
        requests.append(GenerationRequest(ids, config, seed=i, request_id=f"{problem.id}/value"))
    return requests


def _draft_workers(label: str) -> bool:
    """The configuration's method runs its draft in worker processes (one cached executor per worker count)."""
    return method_named(CONFIGS[label][0]).draft_workers


@dataclass
class Measurement:
    label: str
    workload: str
    temperature: float
    n: int
    cell: int
    new_tokens: int
    seconds: float
    proposed: int
    accepted: int
    target_busy: float | None
    extra: dict = field(default_factory=dict)
    part: str = "main"  # "main" (the workload table) or "scaling" (the n sweep)
    events: list[dict] = field(default_factory=list, repr=False)  # SEED's scheduler events

    @property
    def tokens_per_s(self) -> float:
        return self.new_tokens / self.seconds if self.seconds > 0 else 0.0


def target_busy(executor, seconds: float) -> float | None:
    """Share of the run in which the target computed (SEED: from its events; batched: timed forwards)."""
    events = getattr(executor, "last_events", None)
    if events:
        from seed_tot.scheduling.events import target_busy_fraction

        return target_busy_fraction(events)
    timing = getattr(executor, "last_timing", None)
    if timing and timing.get("wall_seconds"):
        return timing["target_seconds"] / timing["wall_seconds"]
    return None


class Executors:
    """Builds executors on demand; in-process ones live for the whole run, SEED ones for one cell
    (each SEED configuration holds n worker processes with a draft model each)."""

    def __init__(self, draft, target, threads: int, n_workers: int):
        self.draft, self.target, self.threads, self.n_workers = draft, target, threads, n_workers
        self.cached: dict[str, object] = {}
        self.spawn_seconds: dict[str, float] = {}

    def get(self, label: str, warmup_prompt: list[int], n: int):
        key = f"{label}/n{n}" if _draft_workers(label) else label
        if key in self.cached:
            return self.cached[key]
        method, options = CONFIGS[label]
        options = dict(options)
        if method_named(method).draft_workers:
            options["num_workers"] = n
        executor = make_executor(method, self.target, self.draft, **options)
        started = time.perf_counter()
        try:
            self.run(executor, [GenerationRequest(warmup_prompt, DecodeConfig(max_new_tokens=2), seed=0)] * n)
        except BaseException:
            executor.close()
            raise
        self.spawn_seconds[key] = time.perf_counter() - started
        self.cached[key] = executor
        return executor

    def run(self, executor, requests: list[GenerationRequest]) -> list[GenerationResult]:
        torch.set_num_threads(self.threads)  # SEED sets and restores its own
        return executor.run(requests)

    def release_processes(self) -> None:
        for key in [k for k in self.cached if _draft_workers(k.split("/")[0])]:
            self.cached.pop(key).close()

    def close(self) -> None:
        for executor in self.cached.values():
            executor.close()
        self.cached.clear()


def measure(executors: Executors, label: str, requests, workload: str, temperature: float, cell: int) -> Measurement:
    executor = executors.get(label, requests[0].prompt_ids, len(requests))
    started = time.perf_counter()
    results = executors.run(executor, requests)
    seconds = time.perf_counter() - started
    stats = [r.stats for r in results]
    m = Measurement(
        label=label,
        workload=workload,
        temperature=temperature,
        n=len(requests),
        cell=cell,
        new_tokens=sum(s.new_tokens for s in stats),
        seconds=seconds,
        proposed=sum(s.draft_tokens_proposed for s in stats),
        accepted=sum(s.draft_tokens_accepted for s in stats),
        target_busy=target_busy(executor, seconds),
        extra={"finish": [r.finish_reason for r in results], "first_text": results[0].text[:160],
               "finished_at": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), "load": load_average()},
        events=event_records(getattr(executor, "last_events", None) or []),
    )
    print(
        f"  {workload:8s} T={temperature:<4} n={len(requests)} cell {cell} {label:22s} "
        f"{m.new_tokens:4d} tok {seconds:7.1f} s {m.tokens_per_s:6.2f} tok/s load {load_average()[0]}",
        flush=True,
    )
    return m


def summarize(measurements: list[Measurement], keys=("workload", "temperature", "n")) -> list[dict]:
    """Aggregate per (workload, temperature, n, method): tokens/s, speedup over serial AR and batched AR."""
    groups: dict[tuple, list[Measurement]] = {}
    for m in measurements:
        groups.setdefault(tuple(getattr(m, k) for k in keys) + (m.label,), []).append(m)

    def rate(group_key, label):
        ms = groups.get(group_key + (label,))
        return sum(m.new_tokens for m in ms) / sum(m.seconds for m in ms) if ms else None

    rows = []
    for key, ms in groups.items():
        group_key, label = key[:-1], key[-1]
        tokens, seconds = sum(m.new_tokens for m in ms), sum(m.seconds for m in ms)
        proposed, accepted = sum(m.proposed for m in ms), sum(m.accepted for m in ms)
        busy = [m.target_busy for m in ms if m.target_busy is not None]
        tps, ar, batched = tokens / seconds, rate(group_key, "ar"), rate(group_key, "batched")
        rows.append(
            dict(zip(keys, group_key))
            | {
                "method": label,
                "new_tokens": tokens,
                "seconds": round(seconds, 2),
                "tokens_per_s": round(tps, 2),
                "speedup_vs_ar": round(tps / ar, 2) if ar else None,
                "speedup_vs_batched": round(tps / batched, 2) if batched else None,
                "acceptance": round(accepted / proposed, 3) if proposed else None,
                "target_busy": round(sum(busy) / len(busy), 2) if busy else None,
            }
        )
    return rows


def markdown(rows: list[dict]) -> str:
    head = "| workload | T | n | method | tokens | s | tok/s | vs serial AR | vs batched AR | acceptance | target busy |"
    lines = [head, "|" + "---|" * 11]
    for r in rows:
        cells = [r["workload"], r["temperature"], r["n"], r["method"], r["new_tokens"], r["seconds"], r["tokens_per_s"],
                 f"{r['speedup_vs_ar']}x" if r["speedup_vs_ar"] else "-",
                 f"{r['speedup_vs_batched']}x" if r["speedup_vs_batched"] else "-",
                 r["acceptance"] if r["acceptance"] is not None else "-",
                 r["target_busy"] if r["target_busy"] is not None else "-"]
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    return "\n".join(lines)


@click.command()
@click.option("--new-tokens", default=64, show_default=True, help="max_new_tokens of every request")
@click.option("--temperatures", default="0.2,1.0", show_default=True)
@click.option("--workloads", default="thought,value", show_default=True)
@click.option("--methods", default=DEFAULT_METHODS, show_default=True, help=f"comma list of: {', '.join(CONFIGS)}")
@click.option("--n", "n", default=3, show_default=True, help="requests per tree expansion")
@click.option("--problems", default=1, show_default=True, help="GSM8K problems (cells) per workload and temperature")
@click.option("--first-problem", default=0, show_default=True)
@click.option("--threads", default=2, show_default=True, help="torch threads of in-process methods")
@click.option("--scaling", default="", help="n values for the thought-workload scaling run, e.g. 1,2,3,4,5,6")
@click.option("--scaling-methods", default="ar,batched,batched-sd,seed+all", show_default=True)
@click.option("--scaling-temperature", default=1.0, show_default=True)
@click.option("--ignore-eos", is_flag=True,
              help="every request makes exactly --new-tokens (equal lengths across methods; sampled requests "
                   "otherwise stop at EOS at different points per method)")
@click.option("--tiny", is_flag=True, help="the tiny random-weight pair built in-process (a smoke run, not a measurement)")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), default=None)
@click.option("--records", "records_path", type=click.Path(dir_okay=False), default=None,
              help="JSON-lines log of finished measurements, skipped on a rerun (default: OUT/records.jsonl)")
def main(new_tokens, temperatures, workloads, methods, n, problems, first_problem, threads, scaling, scaling_methods,
         scaling_temperature, ignore_eos, tiny, out_dir, records_path):
    labels = [m.strip() for m in methods.split(",") if m.strip()]
    scale_labels = [m.strip() for m in scaling_methods.split(",") if m.strip()]
    unknown = [m for m in labels + scale_labels if m not in CONFIGS]
    if unknown:
        raise click.BadParameter(f"unknown methods {unknown}; choose from {', '.join(CONFIGS)}")
    started_at, load_before = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), load_average()
    torch.set_num_threads(threads)
    if tiny:
        draft, target = load_pair("tiny-draft", "tiny-target", dtype="float32", device="cpu")
    else:
        draft, target = load_pair("default-draft", "default-target", dtype="bfloat16", device="cpu")
    task, formatter = Gsm8kTask(), PromptFormatter(target.tokenizer)
    raw_rows = [l for l in Path(task_data_path()).read_text().splitlines() if l.strip()]
    all_problems = task.load()
    for problem, line in zip(all_problems, raw_rows):
        problem.meta["answer"] = json.loads(line)["answer"]
    log = RecordLog(records_path or (Path(out_dir) / "records.jsonl" if out_dir else None))
    settings = {"draft": draft.name, "target": target.name, "dtype": str(target.dtype), "threads": threads,
                "new_tokens": new_tokens, "ignore_eos": ignore_eos}
    executors = Executors(draft, target, threads, n)
    measurements: list[Measurement] = []
    failures: list[dict] = []
    cells = []
    for workload in [w.strip() for w in workloads.split(",") if w.strip()]:
        for temperature in [float(t) for t in temperatures.split(",")]:
            for p in range(problems):
                cells.append(("main", workload, temperature, n, first_problem + p, labels))
    for n_scale in [int(x) for x in scaling.split(",") if x.strip()]:
        cells.append(("scaling", "thought", scaling_temperature, n_scale, first_problem, scale_labels))
    try:
        for cell_index, (part, workload, temperature, cell_n, p, cell_labels) in enumerate(cells):
            config = DecodeConfig(max_new_tokens=new_tokens, temperature=temperature, ignore_eos=ignore_eos)
            if workload == "thought":
                requests = thought_requests(task, formatter, all_problems[p], cell_n, config)
            else:
                requests = value_requests(task, formatter, all_problems[p * cell_n :], cell_n, config)
            # rotate the order from cell to cell so no method always runs first
            order = cell_labels[cell_index % len(cell_labels) :] + cell_labels[: cell_index % len(cell_labels)]
            for label in order:
                key = settings_key(f"{part}/{workload}/T={temperature}/n={cell_n}/problem={p}/{label}",
                                   settings | {"config": CONFIGS[label]})
                recorded = log.get(key)
                if recorded is not None:
                    measurements.append(Measurement(**recorded))
                    continue
                try:
                    measurement = measure(executors, label, requests, workload, temperature, cell_index)
                except Exception as exc:  # one failing method must not lose the others' numbers
                    print(f"  {label} FAILED: {type(exc).__name__}: {exc}", flush=True)
                    failures.append({"method": label, "cell": cell_index, "error": f"{type(exc).__name__}: {exc}"})
                    executors.release_processes()
                    continue
                measurement.part = part
                log.add(key, vars(measurement))
                measurements.append(measurement)
            executors.release_processes()
            save(out_dir, measurements, failures, executors, started_at, load_before, threads, final=False)
    finally:
        executors.close()
    save(out_dir, measurements, failures, executors, started_at, load_before, threads, final=True)


def save(out_dir, measurements, failures, executors, started_at, load_before, threads, final: bool) -> None:
    """Write JSON + markdown (after every cell too, so an interrupted run keeps its numbers), and
    the plots at the end."""
    main_rows = summarize([m for m in measurements if m.part == "main"])
    scaling_rows = summarize([m for m in measurements if m.part == "scaling"])
    table = markdown(main_rows)
    if scaling_rows:
        table += "\n\nScaling with n (thought workload):\n\n" + markdown(scaling_rows)
    if final:
        print(table)
    meta = {
        "command": " ".join(sys.argv),
        "started": started_at,
        "finished": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        "load_average_before": load_before,
        "threads": threads,
        "machine_after": machine_facts(),
        "spawn_and_warmup_seconds": executors.spawn_seconds,
        "failures": failures,
        "complete": final,
    }
    if out_dir:
        out = Path(out_dir)
        measured = [{k: v for k, v in vars(m).items() if k != "events"} for m in measurements]
        write_text_atomically(out / "bench_executors.json", json.dumps(
            {"meta": meta, "summary": main_rows, "scaling": scaling_rows, "measurements": measured}, indent=2))
        write_text_atomically(out / "bench_executors.md", f"Command: `{meta['command']}`\n\n{table}\n")
        if final:
            paths = write_plots(out, main_rows, scaling_rows, measurements)
            print(f"wrote {out / 'bench_executors.json'}, {out / 'bench_executors.md'} and "
                  f"{', '.join(p.name for p in paths)}")


def write_plots(out: Path, main_rows: list[dict], scaling_rows: list[dict], measurements: list[Measurement]) -> list[Path]:
    """Speedup bars, the scaling plot, and the schedule and target utilization of one SEED run."""
    from seed_tot.analysis.executor_plots import SpeedupBar, plot_scaling
    from seed_tot.observe.bench_plots import plot_speedups
    from seed_tot.observe.plots import plot_schedule, plot_target_utilization
    from seed_tot.scheduling.events import Event

    bars = [SpeedupBar(r["workload"], r["temperature"], r["method"], r["speedup_vs_ar"]) for r in main_rows]
    paths = [plot_speedups(bars, out / "speedup.png")] if bars else []
    if scaling_rows:
        paths.append(plot_scaling(scaling_rows, out / "scaling.png"))
    seed_runs = [m for m in measurements if m.events and m.part == "main"]
    plain = [m for m in seed_runs if m.label == "seed"] or seed_runs
    if plain:
        events = [Event(**e) for e in plain[0].events]
        title = f"{plain[0].label}: {plain[0].workload}, T={plain[0].temperature}, n={plain[0].n}"
        paths.append(plot_schedule(events, out / "schedule.png", title=title))
        paths.append(plot_target_utilization(events, out / "utilization.png"))
    return paths


def task_data_path() -> Path:
    from seed_tot_tasks.gsm8k import DEFAULT_PATH

    return DEFAULT_PATH


if __name__ == "__main__":
    main()
