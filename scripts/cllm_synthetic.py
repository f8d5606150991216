"""CLLM end to end on a model small enough to train here: a synthetic arithmetic corpus, a byte-level
model pretrained on it from scratch, CLLM training on its Jacobi trajectories, and base vs trained
on held-out problems. Every stage resumes: rerun the same command after an interruption.

    nice -n 5 python scripts/cllm_synthetic.py --run-dir /work/cllm_runs/synthetic --results results/cllm_synthetic

Splits (all from seed_tot.analysis.arithmetic_corpus, questions checked disjoint):
  pretraining text     seed --train-seed, --train-texts problems (the CLLM prompts are its first --cllm-prompts)
  pretraining eval     seed --eval-seed, --eval-problems problems, disjoint from the pretraining text
  measurement          seed --measure-seed, --measure-problems problems, disjoint from both
The run directory holds the model, the CLLM checkpoint and per-problem rows; --results gets the
settings, the logs and the results table (no weights).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
import time
from dataclasses import asdict
from pathlib import Path

import click
import torch

from seed_tot.analysis.arithmetic_corpus import ArithmeticProblem, disjoint_split, final_answer, make_split
from seed_tot.analysis.pretrain import PretrainSettings, pretrain
from seed_tot.cli import main as cli_main
from seed_tot.config import DecodeConfig
from seed_tot.decoding.autoregressive import autoregressive_decode
from seed_tot.decoding.cllm import cllm_decode, trained_runner
from seed_tot.decoding.jacobi import jacobi_decode
from seed_tot.models.loading import load_model
from seed_tot.models.tiny import byte_tokenizer
from seed_tot.runtime import ModelRunner
from seed_tot.training.cllm_metrics import summarize
from seed_tot.training.cllm_trajectory import BlockTrajectory, collect_trajectories


def load_average() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def log_line(path: Path, row: dict) -> None:
    with open(path, "a") as f:
        f.write(json.dumps(row) + "\n")


def read_rows(path: Path) -> list[dict]:
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def greedy_text(runner: ModelRunner, problem: ArithmeticProblem, max_new_tokens: int) -> tuple[list[int], str]:
    out = autoregressive_decode(runner, runner.encode(problem.prompt), DecodeConfig(max_new_tokens=max_new_tokens))
    return out.token_ids, runner.decode(out.token_ids)


def accuracy(runner: ModelRunner, problems: list[ArithmeticProblem], max_new_tokens: int) -> float:
    return sum(final_answer(greedy_text(runner, p, max_new_tokens)[1]) == p.answer for p in problems) / len(problems)


def splits(s: dict) -> dict[str, list[ArithmeticProblem]]:
    train = make_split(s["train_seed"], s["train_texts"])
    evaluation = disjoint_split(s["eval_seed"], s["eval_problems"], train)
    measure = disjoint_split(s["measure_seed"], s["measure_problems"], train + evaluation)
    cllm = train[: s["cllm_prompts"]]
    assert not {p.question for p in measure} & {p.question for p in train + evaluation + cllm}
    return {"train": train, "eval": evaluation, "measure": measure, "cllm": cllm}


def stage_pretrain(s: dict, data: dict, run: Path) -> Path:
    settings = PretrainSettings(**s["pretrain"])
    runner_eval = data["eval"][: s["eval_during_training"]]

    def evaluate(step: int, model) -> None:
        if step % s["eval_every"] and step != settings.steps:
            return
        runner = ModelRunner(model, byte_tokenizer(), "pretraining")
        acc = accuracy(runner, runner_eval, s["max_new_tokens"])
        log_line(run / "pretrain_eval.jsonl", {"step": step, "accuracy": acc, "problems": len(runner_eval), "load": load_average(), "time": time.time()})
        print(f"pretraining step {step}: held-out accuracy {acc:.2f} on {len(runner_eval)}", flush=True)

    started = time.time()
    path = pretrain([p.text for p in data["train"]], run / "model", settings,
                    {"train_seed": s["train_seed"], "train_texts": s["train_texts"]}, on_save=evaluate)
    done = settings.steps
    if not (run / "base_eval.json").is_file() or json.loads((run / "base_eval.json").read_text())["pretrain_steps"] != done:
        runner = load_model(str(path), dtype="float32", device="cpu")
        acc = accuracy(runner, data["eval"], s["max_new_tokens"])
        (run / "base_eval.json").write_text(json.dumps({"accuracy": acc, "problems": len(data["eval"]), "seed": s["eval_seed"], "pretrain_steps": done, "load": load_average(), "seconds_since_stage_start": time.time() - started}) + "\n")
    return path


def stage_cllm(s: dict, data: dict, run: Path, model: Path) -> Path:
    prompts = run / "cllm_prompts.jsonl"
    if not prompts.is_file():
        prompts.write_text("".join(json.dumps({"id": f"train:{i}", "prompt": p.prompt}) + "\n" for i, p in enumerate(data["cllm"])))
    c = s["cllm"]
    out = run / "cllm"
    marker = run / "cllm_base.json"
    if marker.is_file() and json.loads(marker.read_text()) != {"pretrain_steps": s["pretrain"]["steps"]}:
        raise click.UsageError(f"{out} was trained on an earlier state of the model ({marker}): move it away to redo CLLM.")
    marker.write_text(json.dumps({"pretrain_steps": s["pretrain"]["steps"]}) + "\n")
    args = ["train", "cllm", "--model", str(model), "--prompts", str(prompts), "--out", str(out),
            "--block-size", str(c["block_size"]), "--max-new-tokens", str(s["max_new_tokens"]), "--steps", str(c["steps"]),
            "--full", "--lr", str(c["lr"]), "--threads", "1", "--seed", str(c["seed"])]
    started, load = time.time(), load_average()
    # in this process (not a child), so stopping the script stops the training with it
    with open(run / "cllm.log", "a") as log, contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
        print(f"# seed-tot {' '.join(args)}", flush=True)
        cli_main.main(args, standalone_mode=False)
    log_line(run / "cllm_runs.jsonl", {"seconds": time.time() - started, "load_start": load, "load_end": load_average()})
    return out


def timed(decode):
    started = time.perf_counter()
    out = decode()
    return out, time.perf_counter() - started


def measure_one(runner: ModelRunner, problem: ArithmeticProblem, s: dict) -> dict:
    ids = runner.encode(problem.prompt)
    config, n = DecodeConfig(max_new_tokens=s["max_new_tokens"]), s["cllm"]["block_size"]
    blocks = collect_trajectories(runner, ids, n, s["max_new_tokens"])
    ar, ar_s = timed(lambda: autoregressive_decode(runner, ids, config))
    jac, jac_s = timed(lambda: jacobi_decode(runner, ids, config, block_size=n))
    text = runner.decode(ar.token_ids)
    return {"blocks": [b.to_json() | {"context_ids": []} for b in blocks], "tokens": ar.token_ids, "text": text,
            "correct": final_answer(text) == problem.answer, "ar_seconds": ar_s, "jacobi_seconds": jac_s,
            "jacobi_forwards": jac.stats.target_forwards, "ar_forwards": ar.stats.target_forwards,
            "lossless": jac.token_ids == ar.token_ids == [t for b in blocks for t in b.fixed_point]}


def agreement(base: list[int], trained: list[int]) -> tuple[int, int]:
    """Positions where the two greedy outputs hold the same token, and the positions compared
    (the longer output's length: a missing token counts as a difference)."""
    return sum(a == b for a, b in zip(base, trained)), max(len(base), len(trained))


def stage_measure(s: dict, data: dict, run: Path, model: Path, checkpoint: Path) -> list[dict]:
    rows_path = run / "measure.jsonl"
    rows = read_rows(rows_path)
    base = load_model(str(model), dtype="float32", device="cpu")
    models = {"base": base, "cllm": trained_runner(base, str(checkpoint))}
    for index, problem in enumerate(data["measure"]):
        if index < len(rows):
            continue
        row = {"index": index, "answer": problem.answer, "load_before": load_average()}
        for name, runner in models.items():
            row[name] = measure_one(runner, problem, s)
        row["load_after"] = load_average()
        log_line(rows_path, row)
        rows.append(row)
        print(json.dumps({"index": index, **{n: {k: row[n][k] for k in ("correct", "ar_seconds", "jacobi_seconds", "lossless")} for n in models}}), flush=True)
    check = run / "cllm_decode_check.json"
    if not check.is_file():
        results = []
        for problem in data["measure"][: s["decode_checks"]]:
            ids = base.encode(problem.prompt)
            config = DecodeConfig(max_new_tokens=s["max_new_tokens"])
            via_method = cllm_decode(base, ids, config, checkpoint=str(checkpoint))
            results.append(via_method.token_ids == autoregressive_decode(models["cllm"], ids, config).token_ids)
        check.write_text(json.dumps({"problems": len(results), "equal_to_trained_ar": sum(results)}) + "\n")
    return rows


def summary(rows: list[dict], s: dict) -> dict:
    out = {}
    for name in ("base", "cllm"):
        blocks = [BlockTrajectory.from_json(b) for r in rows for b in r[name]["blocks"]]
        ar = sum(r[name]["ar_seconds"] for r in rows)
        jac = sum(r[name]["jacobi_seconds"] for r in rows)
        tokens = sum(len(r[name]["tokens"]) for r in rows)
        out[name] = summarize(blocks) | {
            "problems": len(rows), "accuracy": sum(r[name]["correct"] for r in rows) / len(rows),
            "ar_seconds": ar, "jacobi_seconds": jac, "generated_tokens": tokens,
            "ar_tokens_per_second": tokens / ar, "jacobi_tokens_per_second": tokens / jac,
            "jacobi_speedup_over_ar": ar / jac,
            "decoder_tokens_per_forward": tokens / sum(r[name]["jacobi_forwards"] for r in rows),
            "all_lossless": all(r[name]["lossless"] for r in rows)}
    same, compared = (sum(x) for x in zip(*(agreement(r["base"]["tokens"], r["cllm"]["tokens"]) for r in rows)))
    out["trained_equals_base"] = {"positions_equal": same, "positions": compared, "fraction": same / compared,
                                  "identical_outputs": sum(r["base"]["tokens"] == r["cllm"]["tokens"] for r in rows)}
    loads = [r["load_before"][0] for r in rows] + [r["load_after"][0] for r in rows]
    out["load_average_1min"] = {"min": min(loads), "max": max(loads), "mean": sum(loads) / len(loads)}
    return out


def markdown(result: dict) -> str:
    m = result["measure"]
    lines = ["| model | held-out accuracy | tokens per Jacobi forward (fixed blocks) | mean max fast-forward per block | stationary tokens | decoder tokens per forward | AR tokens/s | Jacobi tokens/s | Jacobi vs AR | Jacobi = AR |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for name in ("base", "cllm"):
        r = m[name]
        lines.append(f"| {name} | {r['accuracy']:.2f} ({round(r['accuracy'] * r['problems'])}/{r['problems']}) | {r['tokens_per_forward']:.3f} "
                     f"| {r['mean_max_fast_forward']:.2f} | {r['stationary_tokens']} of {r['tokens']} | {r['decoder_tokens_per_forward']:.3f} "
                     f"| {r['ar_tokens_per_second']:.1f} | {r['jacobi_tokens_per_second']:.1f} | {r['jacobi_speedup_over_ar']:.2f}x | {r['all_lossless']} |")
    eq = m["trained_equals_base"]
    lines += ["", f"Trained greedy tokens equal to the base model's: {eq['positions_equal']} of {eq['positions']} positions "
              f"({eq['fraction']:.3f}); identical outputs {eq['identical_outputs']} of {m['base']['problems']}.",
              f"Load average (1 min) during measurement: {m['load_average_1min']['min']:.2f}-{m['load_average_1min']['max']:.2f} "
              f"(mean {m['load_average_1min']['mean']:.2f})."]
    return "\n".join(lines) + "\n"


DEFAULTS = {
    "train_seed": 1, "train_texts": 16000, "eval_seed": 2, "eval_problems": 100, "measure_seed": 3,
    "measure_problems": 50, "cllm_prompts": 200, "eval_during_training": 50, "eval_every": 250, "max_new_tokens": 160, "decode_checks": 5,
}


def _fixed(s: dict) -> dict:
    """Settings that must not change on a rerun: all but the pretraining length (which may grow)."""
    return {k: v for k, v in s.items() if k not in ("train_texts", "pretrain", "history")} | {
        "pretrain": {k: v for k, v in s["pretrain"].items() if k != "steps"}}


def write_settings(path: Path, s: dict) -> None:
    history = []
    if path.is_file():
        old = json.loads(path.read_text())
        history = old.get("history", [])
        if _fixed(old) != _fixed(s) or s["pretrain"]["steps"] < old["pretrain"]["steps"] or s["train_texts"] < old["train_texts"]:
            raise click.UsageError(f"{path.parent} was started with other settings ({path}): use another --run-dir.")
        if (old["pretrain"]["steps"], old["train_texts"]) != (s["pretrain"]["steps"], s["train_texts"]):
            history.append({"pretrain_steps": old["pretrain"]["steps"], "train_texts": old["train_texts"], "extended_at": time.time()})
    path.write_text(json.dumps(s | {"history": history}, indent=1) + "\n")


@click.command()
@click.option("--run-dir", default="/work/cllm_runs/synthetic", show_default=True, help="Model, checkpoint, per-problem rows (large files).")
@click.option("--results", default="results/cllm_synthetic", show_default=True, help="Settings, logs and tables (small files).")
@click.option("--pretrain-steps", type=int, default=1000, show_default=True)
@click.option("--train-texts", type=int, default=DEFAULTS["train_texts"], show_default=True, help="Pretraining texts (one pass: steps x batch size).")
@click.option("--batch-size", type=int, default=16, show_default=True)
@click.option("--layers", type=int, default=4, show_default=True)
@click.option("--hidden", type=int, default=256, show_default=True)
@click.option("--cllm-prompts", type=int, default=DEFAULTS["cllm_prompts"], show_default=True)
@click.option("--cllm-steps", type=int, default=2400, show_default=True)
@click.option("--cllm-lr", type=float, default=2e-4, show_default=True)
@click.option("--block-size", type=int, default=16, show_default=True)
@click.option("--measure-problems", type=int, default=DEFAULTS["measure_problems"], show_default=True)
def main(run_dir, results, pretrain_steps, train_texts, batch_size, layers, hidden, cllm_prompts, cllm_steps, cllm_lr, block_size, measure_problems):
    torch.set_num_threads(1)
    run, res = Path(run_dir), Path(results)
    run.mkdir(parents=True, exist_ok=True)
    res.mkdir(parents=True, exist_ok=True)
    pre = PretrainSettings(layers=layers, hidden=hidden, intermediate=3 * hidden, steps=pretrain_steps, batch_size=batch_size)
    s = DEFAULTS | {"train_texts": train_texts, "cllm_prompts": cllm_prompts, "measure_problems": measure_problems, "pretrain": asdict(pre),
                    "cllm": {"steps": cllm_steps, "lr": cllm_lr, "block_size": block_size, "seed": 0, "full": True},
                    "threads": 1, "dtype": "float32"}
    write_settings(run / "settings.json", s)
    data = splits(s)
    model = stage_pretrain(s, data, run)
    checkpoint = stage_cllm(s, data, run, model)
    rows = stage_measure(s, data, run, model, checkpoint)
    result = {"settings": s, "command": " ".join(sys.argv), "base_eval": json.loads((run / "base_eval.json").read_text()),
              "pretrain_eval": read_rows(run / "pretrain_eval.jsonl"), "cllm_runs": read_rows(run / "cllm_runs.jsonl"),
              "cllm_decode_check": json.loads((run / "cllm_decode_check.json").read_text()),
              "measure": summary(rows, s)}
    (res / "results.json").write_text(json.dumps(result, indent=1) + "\n")
    (res / "results.md").write_text(markdown(result))
    for name in ("settings.json", "pretrain_eval.jsonl", "cllm.log", "cllm_runs.jsonl", "base_eval.json", "cllm_decode_check.json"):
        shutil.copy(run / name, res / name)
    for name in ("pretrain_log.jsonl", "pretrain_settings.json"):
        shutil.copy(run / "model" / name, res / name)
    for name in ("train_log.jsonl", "command.json", "checkpoint.json"):
        shutil.copy(checkpoint / name, res / f"cllm_{name}")
    (res / "measure_rows.jsonl").write_text("".join(json.dumps({k: r[k] for k in ("index", "answer", "load_before", "load_after")} | {
        n: {k: v for k, v in r[n].items() if k != "blocks"} for n in ("base", "cllm")}) + "\n" for r in rows))
    print(markdown(result))


if __name__ == "__main__":
    main()
