"""The same GSM8K requests through an in-process executor and through llama.cpp, side by side.

Each configuration runs in its own process (so its peak RSS is its own; for llama.cpp the
server child's peak RSS is added), in the order given, repeated --rounds times (interleaved).
The requests are the first tree level of one GSM8K problem: `--thoughts` sampled thought
requests plus one greedy chain of thought, all with ignore_eos so every configuration decodes
the same number of tokens.

    python scripts/bench_engines.py --configs llama-cpp,batched-lookup,llama-cpp+draft \\
        --problem 31 --max-new-tokens 48 --out results/engines/bench.json
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from types import SimpleNamespace

import click

from seed_tot.records import write_text_atomically
from seed_tot.machine_facts import child_peak_rss_mib, peak_rss_mib


def requests_for(problem_number: int, thoughts: int, max_new_tokens: int, formatter):
    from seed_tot.config import DecodeConfig
    from seed_tot.requests import GenerationRequest
    from seed_tot_tasks import get_task

    task = get_task("gsm8k")
    problem = task.load()[problem_number - 1]
    sampled = DecodeConfig(max_new_tokens=max_new_tokens, temperature=0.7, top_p=0.95, ignore_eos=True)
    greedy = DecodeConfig(max_new_tokens=max_new_tokens, ignore_eos=True)
    thought = formatter.encode(task.thought_prompt(problem, "", 0, task.default_depth))
    requests = [GenerationRequest(thought, sampled, seed, f"thought-{seed}") for seed in range(thoughts)]
    requests.append(GenerationRequest(formatter.encode(task.cot_prompt(problem)), greedy, 0, "cot"))
    return problem.id, requests


def run_one(config: str, args) -> dict:
    """Load, run the requests once, report (in this process)."""
    from seed_tot.reasoning.prompting import PromptFormatter

    started = time.perf_counter()
    server_pid = None
    if config.startswith("llama-cpp"):
        from seed_tot.engines.setup import open_llama_cpp

        run = open_llama_cpp("default-target", "default-draft" if config.endswith("+draft") else None,
                             slots=args.slots, threads=args.llama_threads, ctx_per_slot=4096)
        executor, tokenizer = run.executor, run.tokenizer
        server_pid = executor.server.pid
    else:
        from seed_tot.models.loading import load_model
        from seed_tot.scheduling.factory import make_executor

        target = load_model("default-target")
        executor, tokenizer = make_executor(config, target), target.tokenizer
    load_seconds = time.perf_counter() - started
    problem_id, requests = requests_for(args.problem, args.thoughts, args.max_new_tokens, PromptFormatter(tokenizer))
    started = time.perf_counter()
    results = executor.run(requests)
    seconds = time.perf_counter() - started
    server_rss = child_peak_rss_mib(server_pid) if server_pid else 0.0
    executor.close()
    tokens = sum(r.stats.new_tokens for r in results)
    proposed = sum(r.stats.draft_tokens_proposed for r in results)
    accepted = sum(r.stats.draft_tokens_accepted for r in results)
    return {
        "config": config, "problem": problem_id, "requests": len(requests), "new_tokens": tokens,
        "load_seconds": round(load_seconds, 1), "generate_seconds": round(seconds, 1),
        "tokens_per_second": round(tokens / seconds, 2),
        "acceptance_rate": round(accepted / proposed, 3) if proposed else None,
        "peak_rss_mib": round(peak_rss_mib() + server_rss),
        "cot_text": results[-1].text[:300],
    }


@click.command(help=__doc__)
@click.option("--configs", default="llama-cpp,batched-lookup,llama-cpp+draft", show_default=True)
@click.option("--problem", default=31, show_default=True, help="GSM8K problem number (1-based)")
@click.option("--thoughts", default=3, show_default=True)
@click.option("--max-new-tokens", default=48, show_default=True)
@click.option("--slots", default=4, show_default=True)
@click.option("--llama-threads", default=1, show_default=True)
@click.option("--rounds", default=1, show_default=True)
@click.option("--out", default=None)
@click.option("--one", default=None, hidden=True)  # the child process of one configuration
def main(**options) -> None:
    # in the order declared (click hands them over in command-line order): the settings recorded
    args = SimpleNamespace(**{p.name: options[p.name] for p in click.get_current_context().command.params})
    if args.one:
        print(json.dumps(run_one(args.one, args)))
        return
    rows = []
    for round_index in range(args.rounds):
        for config in args.configs.split(","):
            load = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
            command = [sys.executable, __file__, "--one", config, *_passthrough(args)]
            proc = subprocess.run(command, capture_output=True, text=True)
            if proc.returncode != 0:
                print(proc.stderr[-2000:], file=sys.stderr)
                continue
            row = json.loads(proc.stdout.strip().splitlines()[-1]) | {"round": round_index, "uptime_before": load}
            rows.append(row)
            print(json.dumps(row), flush=True)
            if args.out:
                settings = {k: v for k, v in vars(args).items() if k not in ("one", "out")}
                write_text_atomically(args.out, json.dumps({"settings": settings, "rows": rows}, indent=2) + "\n")


def _passthrough(args) -> list[str]:
    return ["--problem", str(args.problem), "--thoughts", str(args.thoughts), "--max-new-tokens", str(args.max_new_tokens),
            "--slots", str(args.slots), "--llama-threads", str(args.llama_threads)]


if __name__ == "__main__":
    main()
