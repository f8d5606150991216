"""Fitting and measuring a learned judge on a table of states.

Every state of a chain carries the chain's outcome (OVM: outcome supervision). Folds are grouped
by problem, so no problem is scored by a head that saw it. What is measured:
- chain AUROC within a problem: the whole chains (last states) of one problem, right against wrong,
  averaged over the problems that have both (what reranking a problem's chains needs);
- state AUROC within a problem: every state, the same way; step AUROC: the states before a chain's
  last one only (what a tree's partial states need);
- pooled AUROCs, the Brier score and the expected calibration error (10 equal-width bins).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import torch

from seed_tot.observe.paired_stats import auroc
from seed_tot.values.head import ValueHead, fit_logistic

SCOPES = ("all", "final")  # train on every state of a chain, or on whole chains only


@dataclass
class StateTable:
    features: torch.Tensor  # (N, layers, hidden) float16
    labels: torch.Tensor  # (N,) bool: the state's chain reaches a correct answer
    problems: list[str]  # (N) problem id of each state
    chains: torch.Tensor  # (N,) long: one number per chain
    final: torch.Tensor  # (N,) bool: the state is the whole chain
    layers: tuple[int, ...]
    chain_index: torch.Tensor  # (N,) long: the chain's index within its problem (0 greedy, then samples)

    def subset(self, keep: torch.Tensor) -> StateTable:
        index = keep.nonzero().flatten()
        return StateTable(self.features[index], self.labels[index], [self.problems[i] for i in index.tolist()],
                          self.chains[index], self.final[index], self.layers, self.chain_index[index])

    def of_problems(self, problem_ids: set[str]) -> StateTable:
        return self.subset(torch.tensor([p in problem_ids for p in self.problems], dtype=torch.bool))

    def problem_ids(self) -> list[str]:
        return list(dict.fromkeys(self.problems))


def chain_weights(table: StateTable) -> torch.Tensor:
    """1 / (states of its chain) per state: every chain counts once, however many lines it has."""
    counts = torch.bincount(table.chains, minlength=int(table.chains.max()) + 1)
    return 1.0 / counts[table.chains].float()


def fit_head(table: StateTable, layer: int, l2: float, scope: str, meta: dict | None = None) -> ValueHead:
    rows = table if scope == "all" else table.subset(table.final)
    features = rows.features[:, rows.layers.index(layer)].float()
    weights = chain_weights(rows) if scope == "all" else torch.ones(len(rows.labels))
    mean, scale, weight, bias = fit_logistic(features, rows.labels, weights, l2)
    return ValueHead(layer=layer, mean=mean, scale=scale, weight=weight, bias=bias, meta=dict(meta or {}))


def predict(head: ValueHead, table: StateTable) -> torch.Tensor:
    """Each state's probability: whole chains by `head`, the other states by its step head if it has one."""
    probs = head.probability(table.features[:, table.layers.index(head.layer)])
    steps = head.for_state(gives_answer=False)
    if steps is not head:
        partial = ~table.final
        probs[partial] = steps.probability(table.features[partial][:, table.layers.index(steps.layer)])
    return probs


def grouped_folds(problem_ids: list[str], folds: int, seed: int) -> list[set[str]]:
    ids = sorted(problem_ids)
    random.Random(seed).shuffle(ids)
    return [set(ids[i::folds]) for i in range(folds)]


def out_of_fold(table: StateTable, layer: int, l2: float, scope: str, folds: int = 5, seed: int = 0) -> torch.Tensor:
    """Each state's probability from a head fit on the other folds' problems."""
    probs = torch.empty(len(table.labels))
    for held in grouped_folds(table.problem_ids(), folds, seed):
        test = torch.tensor([p in held for p in table.problems], dtype=torch.bool)
        head = fit_head(table.subset(~test), layer, l2, scope)
        probs[test] = predict(head, table.subset(test))
    return probs


def chain_values(probs: torch.Tensor, table: StateTable) -> dict[tuple[str, int], float]:
    """(problem id, chain index) -> the whole chain's probability, from per-state `probs` of `table`."""
    return {(p, int(i)): float(v) for p, i, v, f in
            zip(table.problems, table.chain_index.tolist(), probs.tolist(), table.final.tolist(), strict=True) if f}


def per_problem_auroc(scores: list[float], labels: list[bool], problems: list[str]) -> dict[str, float]:
    """AUROC within each problem that has both labels."""
    by_problem: dict[str, tuple[list[float], list[bool]]] = {}
    for score, label, problem in zip(scores, labels, problems, strict=True):
        entry = by_problem.setdefault(problem, ([], []))
        entry[0].append(score)
        entry[1].append(label)
    found = {problem: auroc(s, y) for problem, (s, y) in by_problem.items()}
    return {problem: value for problem, value in found.items() if value is not None}


def within_problem_auroc(scores: list[float], labels: list[bool], problems: list[str]) -> tuple[float | None, int]:
    """(mean AUROC over the problems that have both labels, how many such problems)."""
    values = list(per_problem_auroc(scores, labels, problems).values())
    return (sum(values) / len(values) if values else None), len(values)


def calibration(probs: torch.Tensor, labels: torch.Tensor, bins: int = 10) -> tuple[float, list[dict]]:
    """(expected calibration error, per bin: range, count, mean predicted, observed rate)."""
    edges = torch.linspace(0, 1, bins + 1)
    rows, error = [], 0.0
    for low, high in zip(edges[:-1], edges[1:]):
        inside = (probs >= low) & ((probs < high) if high < 1 else (probs <= high))
        count = int(inside.sum())
        if count == 0:
            continue
        predicted, observed = float(probs[inside].mean()), float(labels[inside].float().mean())
        error += count / len(probs) * abs(predicted - observed)
        rows.append({"range": [round(float(low), 2), round(float(high), 2)], "count": count,
                     "predicted": round(predicted, 4), "observed": round(observed, 4)})
    return error, rows


def judge_metrics(probs: torch.Tensor, table: StateTable) -> dict:
    """The module docstring's measurements of `probs` (one per state of `table`)."""
    labels = table.labels
    final = table.final
    chain_scores, chain_labels = probs[final].tolist(), labels[final].tolist()
    chain_problems = [p for p, f in zip(table.problems, final.tolist(), strict=True) if f]
    chain_within, chain_n = within_problem_auroc(chain_scores, chain_labels, chain_problems)
    state_within, state_n = within_problem_auroc(probs.tolist(), labels.tolist(), table.problems)
    step_problems = [p for p, f in zip(table.problems, final.tolist(), strict=True) if not f]
    step_within, step_n = within_problem_auroc(probs[~final].tolist(), labels[~final].tolist(), step_problems)
    ece, bins = calibration(probs, labels)
    return {
        "chains": int(final.sum()), "states": len(labels), "problems": len(table.problem_ids()),
        "correct_share": round(float(labels[final].float().mean()), 4),
        "chain_auroc_within": _round(chain_within), "chain_problems_with_both": chain_n,
        "state_auroc_within": _round(state_within), "state_problems_with_both": state_n,
        "step_auroc_within": _round(step_within), "step_problems_with_both": step_n,
        "chain_auroc_pooled": _round(auroc(chain_scores, chain_labels)),
        "state_auroc_pooled": _round(auroc(probs.tolist(), labels.tolist())),
        "brier_chains": round(float(((probs[final] - labels[final].float()) ** 2).mean()), 4),
        "ece_states": round(ece, 4), "calibration_states": bins,
    }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def choose_settings(table: StateTable, l2s: tuple[float, ...], scopes: tuple[str, ...] = SCOPES,
                    folds: int = 5, seed: int = 0) -> tuple[dict, list[dict]]:
    """The (layer, l2, scope) with the best out-of-fold chain AUROC within a problem (state AUROC
    breaks ties), and every setting's measurements."""
    grid = []
    for layer in table.layers:
        for l2 in l2s:
            for scope in scopes:
                probs = out_of_fold(table, layer, l2, scope, folds, seed)
                grid.append({"layer": layer, "l2": l2, "scope": scope, **judge_metrics(probs, table)})
    best = max(grid, key=lambda r: (r["chain_auroc_within"] or 0.0, r["state_auroc_within"] or 0.0))
    return {"layer": best["layer"], "l2": best["l2"], "scope": best["scope"]}, grid


def choose_step_settings(grid: list[dict]) -> dict:
    """The (layer, l2) of the every-state head with the best out-of-fold step AUROC within a problem:
    the step head of a head chosen to read whole chains."""
    rows = [r for r in grid if r["scope"] == "all"]
    best = max(rows, key=lambda r: r["step_auroc_within"] or 0.0)
    return {"layer": best["layer"], "l2": best["l2"], "scope": "all"}
