"""The figures README.md and results/README.md state, each re-derived from the stored files under
results/ without a model (tests/test_claims.py compares them with the text as written).

A `Claim` names the table row it sits in (the start of the row's first cell), the figure exactly as
written, and either `derive` (a function that reads the stored files and writes the figure the same
way) or `not_derivable` (why no stored file can give it). Derivations call the project's own
readers (`seed-tot report`'s comparison code, scripts/blocksworld_blind.py's outcomes, the vote's
own rule for a chain) so that a figure is re-derived the way its page says it was made.
"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from math import comb
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "results"
README = "README.md"
RESULTS_README = "results/README.md"


@dataclass(frozen=True)
class Claim:
    doc: str  # the file, relative to the repository
    row: str  # how the row's first cell starts (the measurement), or a paragraph's words
    text: str  # the figure as written (a substring of the row)
    derive: Callable[[], str] | None = None  # the figure written from the stored files
    files: tuple[str, ...] = ()  # the stored files it rests on, relative to results/
    not_derivable: str = ""  # why no stored file gives it (then derive is None)
    stored: Callable[[], str] | None = None  # a not-derivable figure as a stored aggregate report gives it


# ----------------------------------------------------------------------------- how figures are written


def ratio(value: float, digits: int = 2) -> str:
    return f"{value:.{digits}f}x"


def count(value: float, digits: int = 2) -> str:
    """A count as the pages write it: whole numbers bare, expectations with `digits` decimals."""
    return f"{value:.0f}" if abs(value - round(value)) < 1e-9 else f"{value:.{digits}f}"


def tokens(value: float) -> str:
    return f"{value:,.0f}"


def points(value: float, digits: int = 1) -> str:
    """A difference of accuracies in percentage points, signed."""
    return f"{100 * value:+.{digits}f}"


def percent_change(new: float, old: float) -> str:
    return f"{100 * (new / old - 1):+.1f}%"


# ----------------------------------------------------------------------------- reading the tables


def table_rows(doc: str, heading: str) -> dict[str, list[str]]:
    """The rows of the first table after `heading` in `doc`, by their first cell: every cell."""
    lines = (ROOT / doc).read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip() == heading)
    rows, seen_table = {}, False
    for line in lines[start + 1:]:
        if line.startswith("|"):
            seen_table = True
            cells = [cell.strip() for cell in line.strip().strip("|").split(" | ")]
            if set(cells[0]) <= set("-: ") or cells[0] == "measurement":
                continue
            rows[cells[0]] = cells
        elif seen_table:
            break
    return rows


LINK = re.compile(r"\[([^\]]*)\]\([^)]*\)")
NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?")


def figures(text: str) -> Counter:
    """The numbers a piece of a page states (link targets left out), with how often each appears."""
    return Counter(n.rstrip(",") for n in NUMBER.findall(LINK.sub(r"\1", text)))


# ----------------------------------------------------------------------------- stored runs


def _scripts_on_path() -> None:
    for folder in (ROOT, ROOT / "scripts"):
        if str(folder) not in sys.path:
            sys.path.insert(0, str(folder))


@lru_cache(maxsize=None)
def tree_run(folder: str) -> tuple:
    """`seed-tot report`'s per-problem reading of a run folder under results/ (its traces)."""
    from seed_tot.observe.comparison.runs import report_run
    from seed_tot_tasks import get_task

    return tuple(report_run(RESULTS / folder, get_task))


def rule_correct(folder: str, rule: str) -> int:
    """How many problems of a run the answer rule ("final", "cot_vote", "search", ...) gets right."""
    return sum(r.correct[rule] for r in tree_run(folder))


@lru_cache(maxsize=None)
def pool(folder: str) -> dict:
    """A pool's chains (cot_samples.jsonl) as the comparison reads them, by problem id."""
    from seed_tot.observe.comparison.folders import bundled_loader
    from seed_tot.observe.comparison.pools import pool_problems
    from seed_tot_tasks import get_task

    return pool_problems(RESULTS / folder, get_task, bundled_loader())


def chain_vote(task, problem, result, index: int, arithmetic_check: bool = True) -> str | None:
    """What one chain votes: the vote's own rule (cut off, unparsed or shown wrong by the task's
    check of its written arithmetic: no vote); without `arithmetic_check`, only cut-off and
    unparsed chains are left out."""
    from seed_tot.observe.comparison.pools import chain_answer

    if arithmetic_check:
        return chain_answer(task, problem, result, index)
    if result.finish_reason == "length":
        return None
    return task.extract_answer(problem, task.cot_state(result.text.strip()))


def vote_by_counts(answers: Sequence[str | None], correct: set[str], k: int) -> float:
    """The exact mean over every k-subset of `answers` of the majority vote's credit (ties split
    evenly, no vote = 0), counted by how many chains of each answer a subset holds rather than
    by listing the subsets (the same value as paired_stats.expected_vote_accuracy, much faster)."""
    votes = Counter(a for a in answers if a is not None)
    silent = len(answers) - sum(votes.values())
    groups = list(votes.items())
    total = 0.0

    def walk(i: int, left: int, ways: int, taken: list[tuple[str, int]]) -> None:
        nonlocal total
        if i == len(groups):
            ways *= comb(silent, left)
            if not ways:
                return
            top = max((n for _, n in taken), default=0)
            if top == 0:
                return
            tied = [a for a, n in taken if n == top]
            total += ways * sum(a in correct for a in tied) / len(tied)
            return
        answer, have = groups[i]
        for n in range(min(have, left) + 1):
            walk(i + 1, left - n, ways * comb(have, n), taken + [(answer, n)])

    walk(0, k, 1, [])
    return total / comb(len(answers), k)


def pool_vote(folder: str, k: int, arithmetic_check: bool = True) -> float:
    """The plain vote of k sampled chains, exact mean over k-subsets, summed over the pool's problems."""
    found = 0.0
    for p in pool(folder).values():
        answers = [chain_vote(p.task, p.problem, r, i, arithmetic_check) for i, r in enumerate(p.samples, 1)]
        correct = {a for a in answers if a is not None and p.task.score(p.problem, a) == 1.0}
        found += vote_by_counts(answers, correct, k)
    return found


def pool_tokens(folder: str, k: int) -> float:
    """New tokens per problem of k sampled chains (the pool's mean chain length, times k)."""
    per = [k * sum(r.stats.new_tokens for r in p.samples) / len(p.samples) for p in pool(folder).values()]
    return sum(per) / len(per)


@lru_cache(maxsize=None)
def blocksworld_solved(*folders: str) -> tuple[int, int]:
    """(instances the search's own plan solves, instances) over the pooled run folders."""
    _scripts_on_path()
    from blocksworld_blind import outcomes

    found = outcomes([RESULTS / f for f in folders])
    return sum(o.solved for o in found.values()), len(found)


@lru_cache(maxsize=None)
def stored_json(path: str) -> dict:
    return json.loads((RESULTS / path).read_text())


def peers(folder: str) -> dict[str, dict]:
    """scripts/engine_peers.py's rows of a folder, by system letter."""
    return {row["system"]: row for row in stored_json(f"{folder}/summary.json")["systems"]}


def peer_ratio(folder: str, field: str, first: str, second: str) -> float:
    rows = peers(folder)
    return rows[first][field] / rows[second][field]


def same_answers(folder: str, first: str, second: str) -> bool:
    rows = peers(folder)
    answers = [{p["problem_id"]: p["answer"] for p in rows[s]["per_problem"]} for s in (first, second)]
    return answers[0] == answers[1]


def executor_speedup(folder: str, method: str, workload: str, temperature: float) -> float:
    """tokens/s of `method` over serial AR on one tree expansion (scripts/bench_executors.py's cells)."""
    cells = stored_json(f"{folder}/bench_executors.json")["measurements"]

    def rate(label: str) -> float:
        chosen = [c for c in cells if c["label"] == label and c["workload"] == workload
                  and c["temperature"] == temperature and c.get("part", "main") == "main"]
        return sum(c["new_tokens"] for c in chosen) / sum(c["seconds"] for c in chosen)

    return rate(method) / rate("ar")


def concurrency_speedup(summary: str, wide: int, narrow: int = 1) -> float:
    runs = {r["concurrency"]: r for r in stored_json(summary)["runs"]}
    return runs[wide]["tokens_per_second"] / runs[narrow]["tokens_per_second"]


def api_time_change(path: str, concurrency: int) -> str:
    rows = {(r["way"], r["concurrency"]): r for r in stored_json(path)["rows"]}
    return percent_change(rows[("api", concurrency)]["wall_seconds"], rows[("cli", concurrency)]["wall_seconds"])


def escalation_rows(path: str, pool_key: str) -> dict[str, dict]:
    return {row["rule"]: row for row in stored_json(path)["heldout"][pool_key]}


# ----------------------------------------------------------------------------- derivations of the README's rows


def gsm8k_43_100() -> str:
    tree = "heldout-gsm8k-43-100/tree-bfs-logits-path"
    reports = tree_run(tree)
    n = len(reports)
    chain_tokens = sum(r.chain_tokens for r in reports) / n
    tree_tokens = sum(r.tree_tokens + r.sample_tokens for r in reports) / n
    return (f"{rule_correct(tree, 'cot_vote')}/{n} at {tokens(chain_tokens)} tokens per problem / "
            f"{rule_correct(tree, 'final')}/{n} at {tokens(tree_tokens)}")


def plain_vote_161_220() -> str:
    folder = "heldout-gsm8k-161-220/cot-pool"
    return f"{pool_vote(folder, 8):.1f}/{len(pool(folder))} at {tokens(pool_tokens(folder, 8))}"


def blocksworld_41_60() -> str:
    mcts, bfs = "blocksworld-41-60/mcts-choose", "blocksworld-41-60/choose"
    n = len(tree_run(bfs))
    return f"{rule_correct(mcts, 'final')}/{n} / {rule_correct(bfs, 'final')}/{n} / {rule_correct(bfs, 'cot_vote')}/{n}"


def model_guided_10_iterations() -> str:
    six = blocksworld_solved("blocksworld-41-60/mcts-choose", "blocksworld-61-80/mcts-choose")
    eight = blocksworld_solved("blocksworld-blind/step8/mcts-choose", "blocksworld-blind/step8/mcts-choose-11-40")
    return f"model-guided {six[0]}/{six[1]} / {eight[0]}/{eight[1]}"


def blind_more_iterations() -> str:
    thirty = blocksworld_solved("blocksworld-blind/iterations-30/41-60", "blocksworld-blind/iterations-30/61-80")
    hundred = blocksworld_solved("blocksworld-blind/step8/mcts-blind-iterations-100",
                                 "blocksworld-blind/step8/mcts-blind-iterations-100-11-40")
    return f"blind with 30 / 100 iterations solves {thirty[0]}/{thirty[1]} / {hundred[0]}/{hundred[1]}"


def instances_pooled() -> str:
    six = blocksworld_solved("blocksworld-41-60/mcts-choose", "blocksworld-61-80/mcts-choose")
    eight = blocksworld_solved("blocksworld-blind/step8/mcts-choose", "blocksworld-blind/step8/mcts-choose-11-40")
    return f"over the {six[1] + eight[1]} instances"


def one_expansion() -> str:
    folder = "bench_executors_all_methods"
    return (f"{ratio(executor_speedup(folder, 'batched-lookup-k2', 'thought', 0.2))} (T 0.2), "
            f"{ratio(executor_speedup(folder, 'batched-lookup-k2', 'thought', 1.0))} (T 1.0)")


def twelve_problems() -> str:
    base = "bench_concurrency_12_problems"
    found = sorted([concurrency_speedup(f"{base}/float16-c1-4-8-16/summary.json", 16),
                    concurrency_speedup(f"{base}/float16-c1-16-rerun/summary.json", 16)])
    return f"{found[0]:.2f}-{ratio(found[1])} tokens/s"


def engines_c16() -> str:
    sets = ("engines/peers-gsm8k-321-330-c16", "engines/peers-gsm8k-331-340-c16")
    speed = [ratio(peer_ratio(f, "tokens_per_s", "a", "b")) for f in sets]
    memory = [ratio(peer_ratio(f, "peak_rss_mib", "a", "b")) for f in sets]
    right = [sum(peers(f)[s]["correct"] for f in sets) for s in ("a", "b")]
    n = sum(peers(f)["a"]["problems"] for f in sets)
    return (f"{speed[0]} and {speed[1]} tokens/s at {memory[0]} and {memory[1]} its memory, "
            f"{right[0]}/{n} right against {right[1]}/{n}")


def engines_4_at_once() -> str:
    mapped, earlier = "engines/peers-gsm8k-301-304-mapped-embeddings", "engines/peers-gsm8k-301-304-bf16-packed-load"
    return (f"{ratio(peer_ratio(mapped, 'tokens_per_s', 'a', 'b'))} at {ratio(peer_ratio(mapped, 'peak_rss_mib', 'a', 'b'))} "
            f"({ratio(peer_ratio(earlier, 'tokens_per_s', 'a', 'b'))} in an earlier run)")


INT8_AGAINST_DEFAULT = ("engines/peers-gsm8k-301-304-int8", "engines/peers-gsm8k-321-340-int8",
                        "engines/peers-gsm8k-321-330-c16")


def int8_against_default() -> str:
    speed = [peer_ratio(f, "tokens_per_s", "e", "a") for f in INT8_AGAINST_DEFAULT]
    less = [1 - peer_ratio(f, "peak_rss_mib", "e", "a") for f in INT8_AGAINST_DEFAULT]
    return (f"{min(speed):.2f}-{ratio(max(speed))} tokens/s in "
            f"{100 * min(less):.0f}-{100 * max(less):.0f}% less memory")


def int8_against_llama() -> str:
    folder = "engines/peers-gsm8k-301-304-int8"
    return (f"{ratio(peer_ratio(folder, 'tokens_per_s', 'e', 'b'))} tokens/s in "
            f"{ratio(peer_ratio(folder, 'peak_rss_mib', 'e', 'b'))} its memory")


def int8_right() -> str:
    sets = INT8_AGAINST_DEFAULT[:2]  # 321-330 is part of 321-340: each problem counted once
    right = {s: sum(peers(f)[s]["correct"] for f in sets) for s in ("e", "a")}
    n = sum(peers(f)["e"]["problems"] for f in sets)
    return f"{right['e']} of {n} problems right against the default's {right['a']}"


def llama_without_16_bit() -> str:
    folder = "engines/peers-gsm8k-301-304"
    same = "the same answers" if same_answers(folder, "c", "a") else "other answers"
    return f"{peer_ratio(folder, 'tokens_per_s', 'c', 'a'):.1f}x tokens/s, {same}"


def api_against_cli() -> str:
    return " / ".join([api_time_change("bench_api/bench_api_bf16_c1.json", 1),
                       api_time_change("bench_api/bench_api_bf16_c4_c16.json", 4),
                       api_time_change("bench_api/bench_api_bf16_c4_c16.json", 16)]) + " time"


ESCALATION_161_220 = "value-gsm8k/escalation_266_problems_161_220.json"
BLIND_20 = "blocksworld-blind/blind_expectation_20_seeds.json"


def escalated_161_220() -> str:
    row = escalation_rows(ESCALATION_161_220, "results/heldout-gsm8k-161-220/cot-pool:8")["escalating vote, up to 2 round(s)"]
    return f"{row['correct']:.1f}/{row['problems']} at {tokens(row['tokens'])} tokens per problem"


def escalated_161_220_interval() -> str:
    row = escalation_rows(ESCALATION_161_220, "results/heldout-gsm8k-161-220/cot-pool:8")["escalating vote, up to 2 round(s)"]
    low, high = row["ci95"]
    return f"{points(row['minus_vote_of_8'])} points [{points(low)}, {points(high)}]"


def blind_rows() -> dict[str, dict]:
    return {row["instances"]: row for row in stored_json(BLIND_20)["rows"]}


def blind_expectation() -> str:
    rows = blind_rows()
    six, eight = rows["optimal plan 6 steps"], rows["optimal plan 8 steps"]
    seeds = sorted({n for row in (six, eight) for n in row["blind_runs_per_instance"]})
    return (f"blind {six['blind_expected']:.2f}/{six['n']} / {eight['blind_expected']:.2f}/{eight['n']} "
            f"(expected over {'/'.join(map(str, seeds))} seeds)")


def blind_difference() -> str:
    row = blind_rows()["all"]
    low, high = row["ci95"]
    return f"{points(row['model_minus_blind'])} points [{points(low)}, {points(high)}]"


JUDGE_VALUES = ("the judge's value of each chain is not stored (its features are in runs/value-gsm8k-s13, "
                "which does not ship): only the aggregate report is, and re-reading needs the target model")
BLIND_SEEDS = "17 of the blind tree's 20 seeds are in runs/blocksworld-blind-seeds, which does not ship; results/ holds 3"

README_ROWS = {
    "gsm8k43": "GSM8K, held-out problems 43-100",
    "gsm8k161": "GSM8K, fresh test problems 161-220",
    "bw": "Blocksworld instances 41-60",
    "blind": "how much of that is the model's",
    "expansion": "one tree expansion (3 thoughts)",
    "twelve": "12 GSM8K problems searched together",
    "engines": "the in-process default against a tuned llama.cpp server",
    "int8": "`--int8` (opt-in;",
    "llama": "llama.cpp (`--method llama-cpp`) against the in-process default",
    "api": "`seed-tot api` against the CLI",
    "lossless": "lossless",
}

R = README_ROWS
CLAIMS: tuple[Claim, ...] = (
    Claim(README, R["gsm8k43"], "42/58 at 1,338 tokens per problem / 40/58 at 2,555", gsm8k_43_100,
          ("heldout-gsm8k-43-100/tree-bfs-logits-path",)),
    Claim(README, R["gsm8k161"], "42.8/60 at 2,321", plain_vote_161_220, ("heldout-gsm8k-161-220/cot-pool",)),
    Claim(README, R["gsm8k161"], "45.8/60 at 1,986 tokens per problem", not_derivable=JUDGE_VALUES,
          files=(ESCALATION_161_220,), stored=escalated_161_220),
    Claim(README, R["gsm8k161"], "+5.1 points [+0.6, +10.8]", not_derivable=JUDGE_VALUES,
          files=(ESCALATION_161_220,), stored=escalated_161_220_interval),
    Claim(README, R["bw"], "14/20 / 7/20 / 1/20", blocksworld_41_60,
          ("blocksworld-41-60/mcts-choose", "blocksworld-41-60/choose")),
    Claim(README, R["blind"], "model-guided 27/40 / 16/40", model_guided_10_iterations,
          ("blocksworld-41-60/mcts-choose", "blocksworld-61-80/mcts-choose", "blocksworld-blind/step8/mcts-choose",
           "blocksworld-blind/step8/mcts-choose-11-40")),
    Claim(README, R["blind"], "blind 23.95/40 / 11.85/40 (expected over 20 seeds)", not_derivable=BLIND_SEEDS,
          files=(BLIND_20,), stored=blind_expectation),
    Claim(README, R["blind"], "+9.0 points [+0.2, +17.8]", not_derivable=BLIND_SEEDS,
          files=(BLIND_20,), stored=blind_difference),
    Claim(README, R["blind"], "over the 80 instances", instances_pooled),
    Claim(README, R["blind"], "blind with 30 / 100 iterations solves 33/40 / 27/40", blind_more_iterations,
          ("blocksworld-blind/iterations-30", "blocksworld-blind/step8/mcts-blind-iterations-100",
           "blocksworld-blind/step8/mcts-blind-iterations-100-11-40")),
    Claim(README, R["expansion"], "4.66x (T 0.2), 2.90x (T 1.0)", one_expansion,
          ("bench_executors_all_methods/bench_executors.json",)),
    Claim(README, R["twelve"], "2.18-2.59x tokens/s", twelve_problems,
          ("bench_concurrency_12_problems/float16-c1-4-8-16/summary.json",
           "bench_concurrency_12_problems/float16-c1-16-rerun/summary.json")),
    Claim(README, R["engines"], "3.21x and 2.80x tokens/s at 1.37x and 1.32x its memory, 16/20 right against 15/20",
          engines_c16, ("engines/peers-gsm8k-321-330-c16/summary.json", "engines/peers-gsm8k-331-340-c16/summary.json")),
    Claim(README, R["engines"], "2.11x at 1.37x (1.84x in an earlier run)", engines_4_at_once,
          ("engines/peers-gsm8k-301-304-mapped-embeddings/summary.json",
           "engines/peers-gsm8k-301-304-bf16-packed-load/summary.json")),
    Claim(README, R["int8"], "1.03-1.26x tokens/s in 21-30% less memory", int8_against_default,
          tuple(f"{f}/summary.json" for f in INT8_AGAINST_DEFAULT)),
    Claim(README, R["int8"], "2.58x tokens/s in 0.98x its memory", int8_against_llama,
          ("engines/peers-gsm8k-301-304-int8/summary.json",)),
    Claim(README, R["int8"], "15 of 24 problems right against the default's 17", int8_right,
          ("engines/peers-gsm8k-301-304-int8/summary.json", "engines/peers-gsm8k-321-340-int8/summary.json")),
    Claim(README, R["llama"], "2.6x tokens/s, the same answers", llama_without_16_bit,
          ("engines/peers-gsm8k-301-304/summary.json",)),
    Claim(README, R["api"], "+0.0% / -2.1% / -2.2% time", api_against_cli,
          ("bench_api/bench_api_bf16_c1.json", "bench_api/bench_api_bf16_c4_c16.json")),
    Claim(README, "On a quiet 2-core machine the problem takes", "51-66 s, 3.6 GiB peak",
          not_derivable="no stored run of the first command gives it: the only stored one "
                        "(results/engines/first_command/self_consistency_vs_tree) took 96 s at 7,313 MiB, with an older default"),
)


def claims_of(doc: str) -> list[Claim]:
    return [c for c in CLAIMS if c.doc == doc]
