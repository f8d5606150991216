"""`seed-tot train value`: a learned judge from the target's own rollouts on training problems.

Three resumable stages, each skipping what its folder already holds:
1. rollouts: the greedy chain and K sampled chains per training problem, exactly as
   self-consistency samples them (OUT/train-pool/cot_samples.jsonl);
2. features: the target's hidden state at the end of every line of every chain, at a few layers
   (OUT/features-<dtype>/);
3. fit: layer, penalty and scope chosen by problem-grouped cross-validation, then one head fit on
   every training problem (OUT/value_head.safetensors, OUT/fit_report.json); a head chosen to read
   whole chains carries a step head for the states that give no answer yet, chosen the same way by
   its step AUROC.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import click

from seed_tot.errors import ConfigError, SeedTotError
from seed_tot.training.value.rollout_engine import (
    ROLLOUT_ENGINE_CHOICES,
    load_rollout_target,
    open_rollout_executor,
    resolve_rollout_engine,
)

DEFAULT_LAYER_FRACTIONS = (0.25, 0.5, 0.75)
L2_GRID = (0.01, 0.1, 1.0)


def parse_layers(text: str | None, layer_count: int) -> tuple[int, ...]:
    """"7,14,21" -> (7, 14, 21); None: a quarter, half and three quarters of the way up."""
    if text is None:
        return tuple(sorted({max(1, round(f * layer_count)) for f in DEFAULT_LAYER_FRACTIONS}))
    try:
        layers = tuple(sorted({int(part) for part in text.split(",") if part.strip()}))
    except ValueError:
        layers = ()
    if not layers or layers[0] < 1 or layers[-1] > layer_count:
        raise ConfigError(f"Bad --layers {text!r}: give comma-separated decoder layers between 1 and {layer_count}.")
    return layers


def training_problems(task, data: Path | None, count: int) -> tuple[list, Path]:
    """The first `count` problems of the task's training split (or of `data`), never a test problem."""
    path = data or task.train_data_path
    if path is None:
        raise ConfigError(f"Task {task.name!r} bundles no training split: give one with --data.")
    problems = task.load(path)
    test = task.load()
    test_ids, test_questions = {p.id for p in test}, {p.question for p in test}
    leaked = [p.id for p in problems if p.id in test_ids or p.question in test_questions]
    if leaked:
        raise ConfigError(f"{path} holds {len(leaked)} of the task's test problems (e.g. {leaked[0]}): "
                          "a judge is trained on training problems only.")
    return problems[:count], Path(path)


@click.command()
@click.option("--task", "task_name", default="gsm8k", show_default=True, help="A task with a chain-of-thought prompt.")
@click.option("--target", default="default-target", show_default=True, help="The target model the judge is for.")
@click.option("--dtype", default="auto", show_default=True)
@click.option("--data", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="Training problems (default: the task's bundled training split).")
@click.option("--problems", default=400, show_default=True, help="Train on the first N training problems.")
@click.option("--samples", default=8, show_default=True, help="Sampled chains per problem (beside the greedy one).")
@click.option("--concurrency", default=8, show_default=True, help="Problems sampled at once (one continuous batch).")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=Path("runs/value-gsm8k"), show_default=True)
@click.option("--pool", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="The rollouts folder (default OUT/train-pool).")
@click.option("--layers", default=None, help="Decoder layers to try, e.g. 7,14,21 (default: 1/4, 1/2, 3/4 of the depth).")
@click.option("--collect/--no-collect", default=True, show_default=True,
              help="Sample missing rollouts first (--no-collect: fit on what the pool holds).")
@click.option("--collect-only", is_flag=True, help="Stop after sampling the rollouts (a long first stage).")
@click.option("--seed", default=0, show_default=True, help="Run seed of the rollouts and of the cross-validation folds.")
@click.option("--rollout-engine", type=click.Choice(list(ROLLOUT_ENGINE_CHOICES)), default="auto", show_default=True,
              help="What samples the rollouts: the in-process target, or llama.cpp's server on the target's own "
                   "GGUF file (the same weights; faster on a CPU without native 16-bit arithmetic). auto: with "
                   "--collect-only, llama.cpp for a GGUF target on such a CPU when it is installed; else in process "
                   "(a run that goes on to the features has the target loaded already).")
def value(task_name, target, dtype, data, problems, samples, concurrency, out, pool, layers, collect, collect_only, seed,
          rollout_engine):
    """Train a value head on the target's rollouts; writes OUT/value_head.safetensors
    (use it with --value-mode learned --value-model FILE)."""
    try:
        _train(task_name, target, dtype, data, problems, samples, concurrency, out, pool or out / "train-pool",
               layers, collect, collect_only, seed, rollout_engine)
    except SeedTotError as error:
        raise click.ClickException(str(error)) from None


def _train(task_name, target_name, dtype, data, count, samples, concurrency, out, pool, layers_text, collect,
           collect_only, seed, rollout_engine="auto"):
    from seed_tot.models.fingerprint import weights_fingerprint
    from seed_tot.runtime.hidden import decoder_layer_count
    from seed_tot.values.features import FeatureReader
    from seed_tot.training.value.store import FeatureStore, chain_keys, chains_of_pool, extract, feature_settings
    from seed_tot_tasks import get_task

    task = get_task(task_name)
    if task.cot_prompt is None:
        raise ConfigError(f"Task {task_name!r} has no chain-of-thought prompt, so it has no rollouts to learn from.")
    problems, data_path = training_problems(task, data, count)
    rollout_engine = resolve_rollout_engine(rollout_engine, target_name, weights_loaded=not collect_only)
    # the features need the weights here; rollouts alone from an engine need only the tokenizer
    target = load_rollout_target(target_name, dtype, rollout_engine if collect_only else "in-process")
    if collect:
        from seed_tot.training.value.rollouts import collect_rollouts

        executor, method, engine = open_rollout_executor(rollout_engine, target_name, target, concurrency * (samples + 1))
        try:
            collect_rollouts(pool, task, problems, samples, target, executor, method, concurrency, seed, engine=engine)
        finally:
            executor.close()
    if collect_only:
        click.echo(f"rollouts: {pool / 'cot_samples.jsonl'}")
        return
    if not (pool / "cot_samples.jsonl").is_file():
        raise ConfigError(f"{pool} holds no rollouts: run without --no-collect, or give --pool.")
    chosen_ids = {p.id for p in problems}
    items = [item for item in chains_of_pool(pool, get_task) if item.problem_id in chosen_ids]
    layers = parse_layers(layers_text, decoder_layer_count(target.model))
    fingerprint = weights_fingerprint(target.model)
    settings = feature_settings(target, fingerprint, layers)
    store = FeatureStore(out / f"features-{settings['dtype']}", settings)
    started = time.perf_counter()
    reader = FeatureReader(target, layers)
    extract(store, reader, items)
    feature_seconds = time.perf_counter() - started
    table = store.table(chain_keys(items))
    report = fit_and_save(table, out, settings, sorted(table.problem_ids()), data_path, seed)
    report["feature_seconds_this_run"] = round(feature_seconds, 1)
    report["feature_tokens_this_run"] = reader.tokens_read
    (out / "fit_report.json").write_text(json.dumps(report, indent=2) + "\n")
    best = report["chosen"]
    click.echo(f"value head: {out / 'value_head.safetensors'} (layer {best['layer']}, l2 {best['l2']}, "
               f"{best['scope']} states; {report['train']['problems']} problems, {report['train']['chains']} chains); "
               f"cross-validated chain AUROC within a problem {best['chain_auroc_within']}, "
               f"state AUROC within a problem {best['state_auroc_within']}")
    if report["steps_head"]:
        steps = report["steps_head"]
        click.echo(f"step head (states that give no answer yet): layer {steps['layer']}, l2 {steps['l2']}; "
                   f"cross-validated step AUROC within a problem {steps['step_auroc_within']}")


def grid_row(grid: list[dict], setting: dict) -> dict:
    """The cross-validation row of a (layer, l2, scope) setting."""
    key = ("layer", "l2", "scope")
    return next(r for r in grid if all(r[k] == setting[k] for k in key))


def fit_and_save(table, out: Path, settings: dict, problem_ids: list[str], data_path: Path, seed: int) -> dict:
    from seed_tot.training.value.fit import choose_settings, choose_step_settings, fit_head
    from seed_tot_tasks.base import data_file_record

    chains = table.labels[table.final]
    if bool(chains.all()) or not bool(chains.any()):
        raise ConfigError(f"All {len(chains)} chains of the {len(problem_ids)} training problems are "
                          f"{'right' if bool(chains.all()) else 'wrong'}: a judge learns from both, so train on "
                          "more (or harder / easier) problems.")
    chosen, grid = choose_settings(table, L2_GRID, seed=seed)
    head_id = f"{settings['target']}-L{chosen['layer']}-{len(problem_ids)}p-{settings['target_fingerprint'][:8]}"
    best = grid_row(grid, chosen)
    data_file = data_file_record(data_path)  # named by its repository path or as typed, with its sha256
    meta = {**settings, "head_id": head_id, "scope": chosen["scope"], "l2": chosen["l2"],
            "train_data": data_file["path"], "train_data_sha256": data_file["sha256"], "train_problem_ids": problem_ids,
            "cross_validated": {k: best[k] for k in ("chain_auroc_within", "state_auroc_within", "ece_states")},
            "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    head = fit_head(table, chosen["layer"], chosen["l2"], chosen["scope"], meta)
    steps = None
    if chosen["scope"] == "final":
        steps = grid_row(grid, choose_step_settings(grid))
        head.steps = fit_head(table, steps["layer"], steps["l2"], "all", {
            "scope": "all", "l2": steps["l2"],
            "cross_validated": {k: steps[k] for k in ("step_auroc_within", "state_auroc_within", "ece_states")}})
    head.save(out / "value_head.safetensors")
    return {"head_id": head_id, "chosen": best, "steps_head": steps, "grid": grid, "settings": settings,
            "train": {"problems": len(problem_ids), "chains": len(chains), "states": len(table.labels),
                      "data": data_file["path"], "data_sha256": data_file["sha256"]}}
