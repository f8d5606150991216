"""Which judge head reads whole chains best: candidates compared by cross-validation on training
problems only (5 folds grouped by problem), one chosen by a rule fixed before any test problem is
read, then the chosen head and the packaged form measured on the held-out pools.

    python scripts/judge_head_cv.py --train runs/judge-features/value-gsm8k-train-pool-bfloat16 \
        --pool results/value-gsm8k/train-pool --head seed_tot/values/heads/HEAD.safetensors \
        --heldout results/heldout-gsm8k-43-100/cot-pool:16 --heldout results/heldout-gsm8k-101-160/cot-pool:8 \
        --heldout results/heldout-gsm8k-161-220/cot-pool:8 --out results/value-gsm8k/head_cv

Features are the stored readings of scripts/judge_values.py (the target's residual stream at a
chain's last answer token, at the layers the store holds; runs/judge-features/<pool>-<dtype>/), of
the head's own training problems. Candidates, each on whole chains (the chain head's job):
- `logistic Lx`: the packaged form (logistic regression on one layer), at each stored layer and L2;
- `logistic cat`: the stored layers concatenated;
- `mlp Lx` / `mlp cat`: one hidden layer of 64 ReLU units, weight decay, full-batch Adam (seeded);
- `+ length`: a logistic head with the chain's log token count and state count appended;
- `+ agreement`: ... and the share of the problem's other chains that give the same answer. It
  needs the other chains, which a judge reading each chain as it ends does not have: reported,
  never chosen.
Rule (results/value-gsm8k/README.md, Rule 10): the eligible candidate with the highest mean
out-of-fold chain AUROC within a problem is chosen; it replaces the packaged form only if it beats
the packaged form's own cross-validated figure by at least 0.01 (smaller gains are within the
noise of 266 problems, and the simpler head ships). Writes OUT.md and OUT.json.
"""

from __future__ import annotations

import math
import sys
from collections import Counter
from pathlib import Path

import click
import torch

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # `python scripts/judge_head_cv.py` from anywhere: the package and tasks/
    sys.path.insert(0, str(ROOT))

from seed_tot.analysis.report_files import write_report  # noqa: E402

L2S = (1.0, 10.0)
MARGIN = 0.01  # how much better than the packaged form a head must be to replace it
HIDDEN = 64


def chain_rows(table):
    """The whole-chain rows of a state table (one per chain)."""
    return table.subset(table.final)


def free_features(rows, pool_chains: dict, with_agreement: bool) -> torch.Tensor:
    """Per chain: log(1 + new tokens), log(1 + states), and (with_agreement) the share of the
    problem's other chains that give the same answer (0 for a chain that gives none)."""
    found = []
    for pid, index in zip(rows.problems, rows.chain_index.tolist(), strict=True):
        answers, tokens, states = pool_chains[pid]
        row = [math.log1p(tokens[index]), math.log1p(states.get(index, 1))]
        if with_agreement:
            mine = answers[index]
            others = [a for i, a in enumerate(answers) if i != index]
            row.append(sum(a == mine for a in others) / len(others) if mine is not None and others else 0.0)
        found.append(row)
    return torch.tensor(found, dtype=torch.float32)


def inputs(rows, candidate: dict, pool_chains: dict) -> torch.Tensor:
    layer = candidate["layer"]
    x = rows.features.float().flatten(1) if layer == "cat" else rows.features[:, rows.layers.index(layer)].float()
    extra = candidate.get("extra")
    if extra:
        x = torch.cat([x, free_features(rows, pool_chains, extra == "agreement")], dim=1)
    return x


def fit_mlp(x: torch.Tensor, y: torch.Tensor, l2: float, epochs: int = 300, seed: int = 0):
    from seed_tot.values.head import standardiser

    mean, scale = standardiser(x)
    z = (x - mean) / scale
    generator = torch.Generator().manual_seed(seed)
    w1 = (torch.randn(z.shape[1], HIDDEN, generator=generator) / math.sqrt(z.shape[1])).requires_grad_()
    b1 = torch.zeros(HIDDEN, requires_grad=True)
    w2 = (torch.randn(HIDDEN, generator=generator) / math.sqrt(HIDDEN)).requires_grad_()
    b2 = torch.zeros(1, requires_grad=True)
    optimiser = torch.optim.Adam([w1, b1, w2, b2], lr=1e-3)
    with torch.enable_grad():
        for _ in range(epochs):
            optimiser.zero_grad()
            logits = torch.relu(z @ w1 + b1) @ w2 + b2
            loss = torch.nn.functional.binary_cross_entropy_with_logits(logits, y.float())
            loss = loss + 0.5 * l2 / len(y) * ((w1 * w1).sum() + (w2 * w2).sum())
            loss.backward()
            optimiser.step()
    weights = [t.detach() for t in (w1, b1, w2, b2)]
    return lambda x_new: torch.relu(((x_new - mean) / scale) @ weights[0] + weights[1]) @ weights[2] + weights[3]


def fit(x: torch.Tensor, y: torch.Tensor, candidate: dict):
    """A scoring function fit on (x, y) by the candidate's kind."""
    from seed_tot.values.head import fit_logistic

    if candidate["kind"] == "mlp":
        return fit_mlp(x, y, candidate["l2"])
    mean, scale, w, b = fit_logistic(x, y, torch.ones(len(y)), candidate["l2"])
    return lambda x_new: ((x_new - mean) / scale) @ w + b


def cross_validated(rows, candidate: dict, pool_chains: dict, folds: int = 5, seed: int = 0) -> torch.Tensor:
    from seed_tot.training.value.fit import grouped_folds

    x = inputs(rows, candidate, pool_chains)
    scores = torch.empty(len(rows.labels))
    for held in grouped_folds(rows.problem_ids(), folds, seed):
        test = torch.tensor([p in held for p in rows.problems])
        scores[test] = fit(x[~test], rows.labels[~test], candidate)(x[test]).detach()
    return scores


def within(scores: torch.Tensor, rows) -> float:
    from seed_tot.training.value.fit import within_problem_auroc

    value, _ = within_problem_auroc(scores.tolist(), rows.labels.tolist(), rows.problems)
    return round(value, 4)


def candidates(layers: tuple[int, ...], packaged: dict) -> list[dict]:
    found = [{"kind": "logistic", "layer": layer, "l2": l2} for layer in layers for l2 in L2S]
    found += [{"kind": "logistic", "layer": "cat", "l2": l2} for l2 in L2S]
    found += [{"kind": "mlp", "layer": layer, "l2": l2} for layer in (packaged["layer"], "cat") for l2 in L2S]
    found += [{"kind": "logistic", "layer": packaged["layer"], "l2": packaged["l2"], "extra": extra}
              for extra in ("length", "agreement")]
    for candidate in found:
        candidate["name"] = (f"{candidate['kind']} {'L' if candidate['layer'] != 'cat' else ''}{candidate['layer']} "
                             f"l2 {candidate['l2']:g}" + (f" + {candidate['extra']}" if candidate.get("extra") else ""))
        candidate["eligible"] = candidate.get("extra") != "agreement"
    return found


def pool_chain_facts(pool: Path, samples: int | None, table) -> dict:
    """{problem id: (answers by chain index, new tokens by chain index, states by chain index)}."""
    from seed_tot.observe.comparison import bundled_loader
    from seed_tot.observe.comparison.pools import chain_answer, pool_problems
    from seed_tot_tasks import get_task

    states = Counter(zip(table.problems, table.chain_index.tolist(), strict=True))
    found = {}
    for pid, p in pool_problems(pool, get_task, bundled_loader()).items():
        results = ([p.greedy] if p.greedy is not None else []) + (p.samples[:samples] if samples else p.samples)
        first = 0 if p.greedy is not None else 1
        answers = {i: chain_answer(p.task, p.problem, r, i) for i, r in enumerate(results, first)}
        tokens = {i: r.stats.new_tokens for i, r in enumerate(results, first)}
        n = max(answers) + 1
        found[pid] = ([answers.get(i) for i in range(n)], [tokens.get(i, 0) for i in range(n)],
                      {i: states[(pid, i)] for i in answers})
    return found


def heldout_measures(train_rows, train_facts, candidate: dict, spec: str, store_root: Path, dtype: str) -> dict:
    """The candidate fit on every training chain, on one held-out pool: chain AUROC within a problem
    and the value-weighted vote of the samples at K = 4 and 8 (exact over K-subsets)."""
    from seed_tot.analysis.judge_values import pool_name
    from seed_tot.analysis.reranking import weighted_vote_credit
    from seed_tot.observe.paired_stats import expected_vote_accuracy
    from seed_tot.observe.rerank import expected_credit
    from seed_tot.training.value.store import FeatureStore, chain_keys, chains_of_pool
    from seed_tot_tasks import get_task

    pool, samples = Path(spec.rsplit(":", 1)[0]), int(spec.rsplit(":", 1)[1])
    items = chains_of_pool(pool, get_task, samples)
    table = FeatureStore.open(store_root / f"{pool_name(pool)}-{dtype}").table(chain_keys(items))
    rows = chain_rows(table)
    facts = pool_chain_facts(pool, samples, table)
    score = fit(inputs(train_rows, candidate, train_facts), train_rows.labels, candidate)
    values = torch.sigmoid(score(inputs(rows, candidate, facts)).detach())
    value_of = {(p, i): float(v) for p, i, v in zip(rows.problems, rows.chain_index.tolist(), values.tolist(), strict=True)}
    found = {"chain_auroc_within": within(values, rows), "problems": len(facts)}
    for k in (4, 8):
        weighted = plain = 0.0
        for pid, (answers, _, _) in facts.items():
            correct = right_answers(items, pid)
            chains = [(a, value_of.get((pid, i)) if a is not None else None) for i, a in enumerate(answers) if i >= 1]
            weighted += expected_credit(weighted_vote_credit, chains, correct, k)
            plain += expected_vote_accuracy([a for a, _ in chains], correct, k)
        found[f"weighted_vote_{k}"] = round(weighted, 2)
        found[f"plain_vote_{k}"] = round(plain, 2)
    return found


def right_answers(items, pid: str) -> set[str]:
    item = next(item for item in items if item.problem_id == pid)
    return {chain.answer for chain in item.chains if chain.correct and chain.answer is not None}


@click.command()
@click.option("--train", "train_store", type=click.Path(exists=True, file_okay=False, path_type=Path), required=True,
              help="The training pool's stored features (scripts/judge_values.py --features).")
@click.option("--pool", type=click.Path(exists=True, file_okay=False, path_type=Path), required=True,
              help="The training pool (greedy + samples per problem) those features were read from.")
@click.option("--head", "head_path", type=click.Path(exists=True, dir_okay=False, path_type=Path), required=True,
              help="The packaged head: its training problems, layer and penalty are the packaged form.")
@click.option("--heldout", multiple=True, help="POOL:SAMPLES, repeatable (test problems, read only after the choice).")
@click.option("--out", type=click.Path(path_type=Path), required=True, help="Writes OUT.md and OUT.json.")
def main(train_store: Path, pool: Path, head_path: Path, heldout: tuple[str, ...], out: Path) -> None:
    from seed_tot.values.head import load_head
    from seed_tot.training.value.store import FeatureStore

    head = load_head(head_path)
    train_ids = set(head.meta["train_problem_ids"])
    store = FeatureStore.open(train_store)
    table = store.table()
    table = table.of_problems(train_ids & set(table.problem_ids()))
    rows = chain_rows(table)
    facts = pool_chain_facts(pool, None, table)
    packaged = {"layer": head.layer, "l2": head.meta["l2"]}
    grid = []
    for candidate in candidates(tuple(store.settings["layers"]), packaged):
        candidate["cv_chain_auroc_within"] = within(cross_validated(rows, candidate, facts), rows)
        grid.append(candidate)
        click.echo(f"{candidate['name']}: {candidate['cv_chain_auroc_within']}")
    base = next(c for c in grid if c["kind"] == "logistic" and c["layer"] == packaged["layer"]
                and c["l2"] == packaged["l2"] and not c.get("extra"))
    best = max((c for c in grid if c["eligible"]), key=lambda c: c["cv_chain_auroc_within"])
    chosen = best if best["cv_chain_auroc_within"] >= base["cv_chain_auroc_within"] + MARGIN else base
    found = {"train_problems": len(rows.problem_ids()), "train_problem_ids": sorted(rows.problem_ids()),
             "train_chains": len(rows.labels), "margin": MARGIN,
             "packaged_form": base["name"], "best_eligible": best["name"], "chosen": chosen["name"], "grid": grid,
             "heldout": {}}
    for spec in heldout:
        found["heldout"][spec] = {name: heldout_measures(rows, facts, c, spec, train_store.parent, store.settings["dtype"])
                                  for name, c in (("packaged form", base), ("best eligible", best))}
    write_report(out, found, markdown(found))


def markdown(found: dict) -> str:
    lines = ["# Judge heads compared by cross-validation on training problems", "",
             f"{found['train_problems']} training problems, {found['train_chains']} chains; 5 folds grouped by problem. "
             f"Chosen by the rule: **{found['chosen']}** (best eligible {found['best_eligible']}; the packaged form "
             f"{found['packaged_form']}; a head must beat the packaged form by {found['margin']} to replace it).", "",
             "| head | out-of-fold chain AUROC within a problem | eligible |", "|---|---|---|"]
    lines += [f"| {c['name']} | {c['cv_chain_auroc_within']} | {'yes' if c['eligible'] else 'no (needs the other chains)'} |"
              for c in found["grid"]]
    for spec, measures in found["heldout"].items():
        lines += ["", f"## {spec}", "", "| head | chain AUROC within | plain vote of 4 | weighted vote of 4 | plain vote of 8 "
                  "| weighted vote of 8 |", "|---|---|---|---|---|---|"]
        for name, m in measures.items():
            lines.append(f"| {name} | {m['chain_auroc_within']} | {m['plain_vote_4']} | {m['weighted_vote_4']} | "
                         f"{m['plain_vote_8']} | {m['weighted_vote_8']} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
