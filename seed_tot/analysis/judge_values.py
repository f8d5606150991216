"""The learned judge's stored values (scripts/judge_values.py writes them): one row per chain with
the value of each of its states, read back as the tables the judge's measurements take, so its
AUROCs, calibration and votes re-derive without the model."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import torch

from seed_tot.training.value.fit import StateTable


def pool_name(pool: Path) -> str:
    """`results/heldout-gsm8k-161-220/cot-pool` -> `heldout-gsm8k-161-220`;
    `results/value-gsm8k/train-pool` -> `value-gsm8k-train-pool`."""
    return pool.parent.name if pool.name == "cot-pool" else f"{pool.parent.name}-{pool.name}"


def values_path(values_dir: Path, pool: Path) -> Path:
    """Where scripts/judge_values.py keeps the values of a pool's chains."""
    return values_dir / f"{pool_name(pool)}.jsonl.gz"


def write_value_rows(path: Path, rows: list[dict]) -> None:
    """Rows as gzip'd JSON lines, byte for byte the same for the same rows (no time stamp in the header)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    data = "".join(json.dumps(row, sort_keys=True) + "\n" for row in rows).encode()
    with open(path, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, compresslevel=9) as handle:
        handle.write(data)


def read_value_rows(path: Path) -> list[dict]:
    with gzip.open(path, "rt") as handle:
        return [json.loads(line) for line in handle]


def value_rows(table: StateTable, probs: torch.Tensor, out_of_fold: bool) -> list[dict]:
    """One row per chain of `table`: its states' values in order, the last being the whole chain's."""
    rows: dict[int, dict] = {}
    for i, chain in enumerate(table.chains.tolist()):
        row = rows.setdefault(chain, {"problem_id": table.problems[i], "chain_index": int(table.chain_index[i]),
                                      "correct": bool(table.labels[i]), "states": [], "out_of_fold": out_of_fold})
        row["states"].append(round(float(probs[i]), 6))
    for row in rows.values():
        row["value"] = row["states"][-1]
    return sorted(rows.values(), key=lambda r: (r["problem_id"], r["chain_index"]))


def chain_values(rows: list[dict], samples: int | None = None) -> dict[tuple[str, int], float]:
    """(problem id, chain index) -> the whole chain's value, of the greedy chain and samples 1..`samples`."""
    return {(row["problem_id"], row["chain_index"]): row["value"] for row in rows
            if samples is None or row["chain_index"] <= samples}


def value_table(rows: list[dict], samples: int | None = None) -> tuple[StateTable, torch.Tensor]:
    """(a feature-less state table of the rows' states, each state's value): what
    seed_tot.training.value.fit.judge_metrics measures."""
    kept = [row for row in rows if samples is None or row["chain_index"] <= samples]
    problems, labels, chains, final, index, probs = [], [], [], [], [], []
    for number, row in enumerate(kept):
        count = len(row["states"])
        problems += [row["problem_id"]] * count
        labels += [row["correct"]] * count
        chains += [number] * count
        final += [False] * (count - 1) + [True]
        index += [row["chain_index"]] * count
        probs += row["states"]
    table = StateTable(torch.empty(len(labels), 0, 0), torch.tensor(labels), problems, torch.tensor(chains),
                       torch.tensor(final), (), torch.tensor(index))
    return table, torch.tensor(probs)


def rated_chains(pool: Path, values: dict[tuple[str, int], float], samples: int | None, task_of,
                 only: set[str] | None = None) -> dict:
    """{problem id: ([(answer, value)] of samples 1..`samples`, correct answers, 0 judge prompt tokens
    per chain)}: what seed_tot.analysis.reranking.rerank_table ranks; a chain that does not answer
    has no value. `task_of(name)` gives the task the pool's rows name; `only`: these problems (a
    pool still growing may hold more)."""
    from seed_tot.observe.comparison import bundled_loader, pool_chains

    rated = {}
    for pid, (_, chains) in pool_chains(pool, task_of, bundled_loader()).items():
        if only is not None and pid not in only:
            continue
        answers = chains.answers[:samples] if samples else chains.answers
        pairs = [(answer, values.get((pid, i)) if answer is not None else None) for i, answer in enumerate(answers, 1)]
        rated[pid] = (pairs, chains.correct, [0] * len(pairs))
    return rated
