"""The judge studies' shared pieces (scripts/judge_*.py, judged_escalation.py): the held-out
features scripts/judge_pool.py stores, read back as state tables, and a plain logistic head fit
out of fold on any per-chain or per-state features."""

from __future__ import annotations

from pathlib import Path

import torch

from seed_tot.values.head import fit_logistic
from seed_tot.training.value.store import FeatureStore, chain_keys, chains_of_pool
from seed_tot.training.value.fit import StateTable, grouped_folds


def heldout_tables(train_dir: Path, specs: list[str], task_of) -> dict[str, StateTable]:
    """{POOL:SAMPLES: the states of the pool's greedy chain and first SAMPLES samples}, read from the
    held-out features `scripts/judge_pool.py --train TRAIN_DIR` stored (TRAIN_DIR/heldout-features-*)."""
    store = FeatureStore.open(next(train_dir.glob("heldout-features-*")))
    tables = {}
    for spec in specs:
        pool, samples = spec.rsplit(":", 1)
        tables[spec] = store.table(chain_keys(chains_of_pool(Path(pool), task_of, int(samples))))
    return tables


def out_of_fold_logits(x: torch.Tensor, labels: torch.Tensor, problems: list[str], l2: float, folds: int = 5,
                       seed: int = 0) -> torch.Tensor:
    """Each row's logit from a logistic head on `x` fit on the other folds' problems (one row per chain
    or state; folds grouped by problem, equal weights)."""
    logits = torch.empty(len(labels))
    for held in grouped_folds(sorted(set(problems)), folds, seed):
        test = torch.tensor([p in held for p in problems])
        mean, scale, w, b = fit_logistic(x[~test], labels[~test], torch.ones(int((~test).sum())), l2)
        logits[test] = ((x[test] - mean) / scale) @ w + b
    return logits
