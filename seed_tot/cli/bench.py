"""`seed-tot bench`: methods side by side on the same problems (the paper's Table 1 layout)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from seed_tot.config import DecodeConfig, parse_k_config
from seed_tot.errors import ConfigError

DEFAULT_METHODS = "ar,sd,seed,batched,batched-sd,hf-generate,hf-assisted"


@click.command("bench")
@click.option("--tasks", default="gsm8k,creative_writing,blocksworld", show_default=True, help="Comma-separated tasks.")
@click.option("--methods", default=DEFAULT_METHODS, show_default=True, help="Comma-separated methods (speculative ones run once per --k-configs entry; hf-generate / hf-assisted are transformers peers).")
@click.option("--k-configs", default="1,1,1;2,2,1", show_default=True, help="Semicolon-separated token-tree shapes for the speculative methods.")
@click.option("--temperatures", default="0.2,1.0", show_default=True, help="Comma-separated thought temperatures.")
@click.option("--peers", is_flag=True, help="Instead of the methods table: GSM8K's default (chains voting, plain vote) against a tuned llama.cpp server doing the same work on the same problems, one after the other, with this machine's CPU and both sides' threads, slots, concurrency and dtype recorded (OUT/summary.md); takes --limit, --start, --concurrency, --systems, --threads, --tiny, --out.")
@click.option("--systems", default="a,b", show_default=True, help="--peers: a = seed-tot gsm8k (default path), b = tuned llama.cpp server, c = --method llama-cpp, d = hf-generate, e = --int8.")
@click.option("--concurrency", type=int, default=16, show_default=True, help="--peers: problems at once, the same for every system (16: the CLI's default).")
@click.option("--limit", type=int, default=None, help="Problems per task (default 1; with --peers 20).")
@click.option("--start", type=int, default=0, show_default=True, help="Index of the first problem of each task.")
@click.option("--thoughts", "n_thoughts", type=int, default=3, show_default=True, help="Thoughts per state (n).")
@click.option("--depth", type=int, default=None, help="Tree depth for every task (default: each task's paper depth).")
@click.option("--max-new-tokens", type=int, default=128, show_default=True, help="New tokens per thought and per evaluation.")
@click.option("--target", default="default-target", show_default=True, help="Target model.")
@click.option("--draft", default="default-draft", show_default=True, help="Draft model.")
@click.option("--tiny", is_flag=True, help="Tiny in-process pair (a smoke test of the bench itself).")
@click.option("--dtype", default="auto", show_default=True, help="Model dtype.")
@click.option("--threads", type=int, default=None, help="torch threads in this process.")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--method-option", "method_options", multiple=True, metavar="NAME=VALUE", help="A setting for every row whose method has it, repeatable, e.g. --method-option checkpoint=runs/bita/bita.safetensors for bita.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), default="bench_out", show_default=True, help="Where bench.md, bench.json and the plots go (--peers: OUT/<system>/ and OUT/summary.*).")
def bench(peers, systems, concurrency, tasks, methods, k_configs, temperatures, limit, start, n_thoughts, depth, max_new_tokens, target, draft, tiny, dtype, threads, seed, method_options, out_dir):
    """Run every method on the same problems; print and write tokens/s and speedup over AR.
    With --peers: the default against a tuned llama.cpp server on the same GSM8K problems."""
    if peers:
        from seed_tot.cli.bench_peers import run_peers

        run_peers(None, start, limit or 20, systems, None, concurrency, threads, out_dir, tiny, force=False)
        return
    limit = limit or 1
    import torch

    from seed_tot.bench import (
        add_speedups,
        build_executor,
        markdown_table,
        plan_rows,
        row_settings,
        run_cell,
        write_outputs,
    )
    from seed_tot.models.loading import check_pair, load_draft, load_model
    from seed_tot.search import BFSConfig
    from seed_tot_tasks import get_task

    try:
        temps = [float(t) for t in temperatures.split(",") if t.strip()]
    except ValueError:
        raise ConfigError(f"Bad --temperatures {temperatures!r}: give comma-separated numbers such as 0.2,1.0.") from None
    shapes = [parse_k_config(k) for k in k_configs.split(";") if k.strip()]
    rows = plan_rows([m.strip() for m in methods.split(",") if m.strip()], shapes)
    from seed_tot.cli.run_checks import parse_method_option

    settings_by_method = row_settings(rows, [parse_method_option(item) for item in method_options])
    task_objs = [get_task(name.strip()) for name in tasks.split(",") if name.strip()]
    if limit < 1 or n_thoughts < 1 or max_new_tokens < 1:
        raise ConfigError("--limit, --thoughts and --max-new-tokens must be at least 1.")
    if threads:
        torch.set_num_threads(threads)
    target_runner = load_model("tiny-target" if tiny else target, dtype=dtype)
    draft_runner = load_draft("tiny-draft" if tiny else draft, target_runner)
    check_pair(draft_runner, target_runner)
    problems = {t.name: t.load()[start : start + limit] for t in task_objs}

    cells = []
    for row in rows:
        executor = build_executor(row, target_runner, draft_runner, n_thoughts, settings_by_method.get(row.method))
        try:
            for temperature in temps:
                for task in task_objs:
                    config = BFSConfig(
                        n_thoughts=n_thoughts,
                        depth=depth,
                        seed=seed,
                        thought_decode=DecodeConfig(max_new_tokens=max_new_tokens, temperature=temperature),
                        value_decode=DecodeConfig(max_new_tokens=max_new_tokens, temperature=0.0),
                    )
                    cell = run_cell(task, problems[task.name], executor, target_runner.tokenizer, "bfs", config, row, temperature)
                    cells.append(cell)
                    click.echo(f"{row.label:28s} T={temperature:<4} {task.name:16s} {cell.tokens_per_second:7.2f} tok/s "
                               f"({cell.new_tokens} tokens, {cell.wall_seconds:.1f} s)", err=True)
        finally:
            executor.close()
    add_speedups(cells)
    settings = dict(tasks=[t.name for t in task_objs], rows=[r.label for r in rows], temperatures=temps, limit=limit,
                    start=start, n_thoughts=n_thoughts, method_options=list(method_options), depth=depth, max_new_tokens=max_new_tokens,
                    target=target_runner.name, draft=draft_runner.name, dtype=str(target_runner.dtype), seed=seed,
                    command=" ".join(["seed-tot", *sys.argv[1:]]))
    click.echo(markdown_table(cells))
    for path in write_outputs(cells, Path(out_dir), settings):
        click.echo(f"wrote {path}")
