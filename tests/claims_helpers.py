"""The figures README.md and results/README.md state, each re-derived from the stored files under
results/ without a model (tests/test_claims.py compares them with the text as written).

A `Claim` names the table row it sits in (the start of the row's first cell), the figure exactly as
written, and either `derive` (a function that reads the stored files and writes the figure the same
way) or `not_derivable` (why no stored file can give it). Derivations call the project's own
readers (`seed-tot report`'s comparison code, scripts/blocksworld_blind.py's outcomes, the vote's
own rule for a chain) so that a figure is re-derived the way its page says it was made.
"""

from __future__ import annotations

import gzip
import json
import re
import sys
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
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
            if set(cells[0]) <= set("-: |") or cells[0] == "measurement":
                continue
            rows[cells[0]] = cells
        elif seen_table:
            break
    return rows


LINK = re.compile(r"\[([^\]]*)\]\([^)]*\)")
CODE = re.compile(r"`[^`]*`")  # commands and option names, not figures
NAME = re.compile(r"\b[A-Za-z][\w]*-\d+\b")  # problem ids and names: gsm8k-1, AVX-512
NUMBER = re.compile(r"(?<![A-Za-z_\d.])\d[\d,]*(?:\.\d+)?")  # not the digits inside a word (float16, GSM8K)


def figures(text: str) -> Counter:
    """The numbers a piece of a page states (link targets, code and names left out), with how often each appears."""
    text = NAME.sub(" ", CODE.sub(" ", LINK.sub(r"\1", text)))
    return Counter(n.rstrip(",") for n in NUMBER.findall(text))


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
    by listing the subsets (analysis/vote_counts.py's counted_vote_accuracy: the same value as
    paired_stats.expected_vote_accuracy, much faster)."""
    from seed_tot.analysis.vote_counts import counted_vote_accuracy

    return counted_vote_accuracy(answers, correct, k)


@lru_cache(maxsize=None)
def pool_votes(folder: str, arithmetic_check: bool = True) -> dict[str, tuple[list[str | None], set[str]]]:
    """Per problem of a pool: what each sampled chain votes, and which of those answers are right."""
    found = {}
    for pid, p in pool(folder).items():
        answers = [chain_vote(p.task, p.problem, r, i, arithmetic_check) for i, r in enumerate(p.samples, 1)]
        found[pid] = answers, {a for a in answers if a is not None and p.task.score(p.problem, a) == 1.0}
    return found


def pool_vote(folder: str, k: int, arithmetic_check: bool = True) -> float:
    """The plain vote of k sampled chains, exact mean over k-subsets, summed over the pool's problems."""
    return pool_vote_of(folder, k, None, arithmetic_check)


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



def step_confidence_best() -> str:
    """The best step AUROC of the target's token confidence, from the stored states, and the gate."""
    _scripts_on_path()
    from step_confidence_auroc import GATE, measure, read_rows

    best = max(value for _, value in measure(read_rows(RESULTS / "value-gsm8k" / "step_confidence.jsonl.gz")))
    return f"token confidence: {best:.3f} at best, where a tree needs {GATE} here"


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


def model_guided_solved() -> tuple[tuple[int, int], tuple[int, int]]:
    """(solved, instances) of the model-guided MCTS on the 6-step 41-80 and the 8-step 1-40 instances."""
    six = blocksworld_solved("blocksworld-41-60/mcts-choose", "blocksworld-61-80/mcts-choose")
    eight = blocksworld_solved("blocksworld-blind/step8/mcts-choose", "blocksworld-blind/step8/mcts-choose-11-40")
    return six, eight


def model_guided_10_iterations() -> str:
    six, eight = model_guided_solved()
    return f"model-guided {six[0]}/{six[1]} / {eight[0]}/{eight[1]}"


def blind_more_iterations() -> str:
    thirty = blocksworld_solved("blocksworld-blind/iterations-30/41-60", "blocksworld-blind/iterations-30/61-80")
    hundred = blocksworld_solved("blocksworld-blind/step8/mcts-blind-iterations-100",
                                 "blocksworld-blind/step8/mcts-blind-iterations-100-11-40")
    return f"blind with 30 / 100 iterations solves {thirty[0]}/{thirty[1]} / {hundred[0]}/{hundred[1]}"


def instances_pooled() -> str:
    six, eight = model_guided_solved()
    return f"over the {six[1] + eight[1]} instances"


def one_expansion(folder: str = "bench_executors_all_methods") -> str:
    return (f"{ratio(executor_speedup(folder, 'batched-lookup-k2', 'thought', 0.2))} (T 0.2), "
            f"{ratio(executor_speedup(folder, 'batched-lookup-k2', 'thought', 1.0))} (T 1.0)")


def expansion_machine(folder: str) -> str:
    """The CPU and dtype a bench_executors run records."""
    meta = stored_json(f"{folder}/bench_executors.json")["meta"]
    flags = meta["machine_after"]["cpu"]["vector_flags"]
    assert meta["machine_after"]["cpu"]["model"] == "AMD EPYC" and "avx512_bf16" in flags and "amx_bf16" not in flags
    with gzip.open(RESULTS / folder / "records.jsonl.gz", "rt") as handle:
        dtypes = {json.loads(json.loads(line)["key"].split("|", 1)[1])["dtype"] for line in handle}
    [dtype] = dtypes
    return f"on an AMD EPYC with AVX-512 BF16, {dtype.removeprefix('torch.')}"


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


JUDGE_VALUES = "value-gsm8k/judge-values"  # the packaged judge's value of every chain and state (scripts/judge_values.py)
VALUES_216 = "value-gsm8k/judge-values-216p"  # the earlier packaged heads' values (results/value-gsm8k/heads/)
VALUES_72 = "value-gsm8k/judge-values-72p"
VALUES_TRAIN = f"{JUDGE_VALUES}/value-gsm8k-train-pool.jsonl.gz"
VALUES_43_100 = f"{JUDGE_VALUES}/heldout-gsm8k-43-100.jsonl.gz"
VALUES_101_160 = f"{JUDGE_VALUES}/heldout-gsm8k-101-160.jsonl.gz"
VALUES_161_220 = f"{JUDGE_VALUES}/heldout-gsm8k-161-220.jsonl.gz"
VALUES_HELD = (VALUES_43_100, VALUES_101_160, VALUES_161_220)
ESCALATION_VALUES = (VALUES_TRAIN, VALUES_43_100, VALUES_101_160, VALUES_161_220, "value-gsm8k/train-pool",
                     "heldout-gsm8k-43-100/cot-pool", "heldout-gsm8k-101-160/cot-pool", "heldout-gsm8k-161-220/cot-pool")
HELD_43, HELD_101, HELD_161 = ("results/heldout-gsm8k-43-100/cot-pool", "results/heldout-gsm8k-101-160/cot-pool",
                              "results/heldout-gsm8k-161-220/cot-pool")
HELDOUT_SAMPLES = {HELD_43: 16, HELD_101: 8,
                   HELD_161: 8}  # the samples each quoted study used


@lru_cache(maxsize=None)
def judge_report(pool: str, values: str = JUDGE_VALUES) -> tuple[dict, tuple[str, ...]]:
    """scripts/judge_pool.py --values's record and reranking table of a held-out pool: the judge's
    AUROCs and votes from its stored values, no model."""
    _scripts_on_path()
    from judge_pool import values_report

    found, table = values_report(ROOT / pool, RESULTS / values, HELDOUT_SAMPLES[pool])
    return found, tuple(table)


def rerank_cells(pool: str, k: int, values: str = JUDGE_VALUES) -> list[str]:
    """The reranking table's row at K: K, plain vote, best-of-K, its gain, weighted vote, its gain."""
    row = next(line for line in judge_report(pool, values)[1] if line.startswith(f"| {k} |"))
    return [cell.strip() for cell in row.strip().strip("|").split("|")]


def weighted_vote(pool: str, k: int, values: str = JUDGE_VALUES) -> str:
    return rerank_cells(pool, k, values)[4].split("/")[0]


def weighted_gain(pool: str, k: int, values: str = JUDGE_VALUES) -> str:
    """'+2.9% [+0.8%, +5.5%]' as the pages write it: '+2.9 [+0.8, +5.5]'."""
    return rerank_cells(pool, k, values)[5].replace("%", "")


def values_auroc(field: str, *pools: str, digits: tuple[int, ...] = (), values: str = JUDGE_VALUES) -> str:
    found = [judge_report(pool, values)[0]["heldout"][field] for pool in pools]
    return " / ".join(f"{v:.{d}f}" for v, d in zip(found, digits or (3,) * len(found), strict=True))


@lru_cache(maxsize=None)
def escalation_study() -> dict[str, dict[str, dict]]:
    """scripts/judged_escalation.py re-run on the stored values: the threshold chosen on the training
    pool's out-of-fold values, each held-out pool's rows by rule."""
    _scripts_on_path()
    from judged_escalation import study

    heldout = [f"{ROOT / pool}:{samples}" for pool, samples in HELDOUT_SAMPLES.items()]
    found, _ = study(RESULTS / JUDGE_VALUES, RESULTS / "value-gsm8k/train-pool", heldout, (4, 4, 8), 0.005, 200, 0, 10_000)
    rows = {spec.rsplit(":", 1)[0].removeprefix(f"{ROOT}/"): {row["rule"]: row for row in table}
            for spec, table in found["heldout"].items()}
    return {"threshold": found["threshold"], **rows}


def escalated_161_220() -> str:
    row = escalation_study()[HELD_161][TWO_ROUNDS]
    return f"{row['correct']:.1f}/{row['problems']} at {tokens(row['tokens'])} tokens per problem"


def escalated_161_220_interval() -> str:
    row = escalation_study()[HELD_161][TWO_ROUNDS]
    low, high = row["ci95"]
    return f"{points(row['minus_vote_of_8'])} points [{points(low)}, {points(high)}]"


BLIND_TABLE = "blocksworld-blind/blind_seeds_3_19.jsonl.gz"  # seeds 3-19, per instance
BLIND_SEED_RUNS = tuple((f"blocksworld-41-60/mcts-blind{seed}", f"blocksworld-61-80/mcts-blind{seed}",
                         f"blocksworld-blind/step8/mcts-blind{seed}", f"blocksworld-blind/step8/mcts-blind{seed}-11-40")
                        for seed in ("", "-seed1", "-seed2"))  # seeds 0-2, as traces


@lru_cache(maxsize=None)
def blind_rows() -> dict[str, dict]:
    """The model-guided tree against the blind tree's expectation over 20 seeds, re-derived as
    scripts/blocksworld_blind_expectation.py derives it: the guided traces, three blind seeds' traces
    and the table of the other 17."""
    _scripts_on_path()
    from blocksworld_blind_expectation import expectation, solved_by_key
    from blocksworld_blind_table import table_runs

    def pooled(folders):
        return solved_by_key("+".join(str(RESULTS / folder) for folder in folders))

    runs = [pooled(folders) for folders in BLIND_SEED_RUNS] + table_runs(RESULTS / BLIND_TABLE)
    rows, _ = expectation(pooled(GUIDED_80), runs)
    return {row["instances"]: row for row in rows}


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


PLAIN_BFS = "blocksworld-plain-bfs/plain_bfs.json"
GUIDED_80 = ("blocksworld-41-60/mcts-choose", "blocksworld-61-80/mcts-choose", "blocksworld-blind/step8/mcts-choose",
             "blocksworld-blind/step8/mcts-choose-11-40")


def plain_bfs_rows() -> list[dict]:
    """scripts/blocksworld_plain_bfs.py's instances, in its order (the order its bootstrap pairs them)."""
    return [row for block in stored_json(PLAIN_BFS)["ranges"] for row in block["instances"]]


def plain_bfs_solved() -> str:
    """Solved instances of the stored plain BFS, each plan re-checked with the task's simulator."""
    from seed_tot_tasks.blocksworld import BlocksworldTask
    from seed_tot_tasks.pddl import parse_pddl_action

    task = BlocksworldTask()
    problems = {p.id: p for block in stored_json(PLAIN_BFS)["ranges"] for p in task.load(ROOT / block["data"])}
    rows = plain_bfs_rows()
    valid = [r for r in rows if r["plan"] is not None
             and task.check(problems[r["problem_id"]], [parse_pddl_action(a) for a in r["plan"]]).valid]
    optimal = all(len(r["plan"]) == len(problems[r["problem_id"]].gold) for r in valid)
    return f"{len(valid)}/{len(rows)} solved, every plan optimal" if optimal else f"{len(valid)}/{len(rows)} solved"


def plain_bfs_seconds() -> str:
    rows = plain_bfs_rows()
    return f"in {sum(r['seconds'] for r in rows):.1f} s of search for the {len(rows)}"


def plain_bfs_against_guided() -> str:
    _scripts_on_path()
    from blocksworld_blind import outcomes

    guided = outcomes([RESULTS / f for f in GUIDED_80])
    rows = plain_bfs_rows()
    differences = [float(r["solved"]) - float(guided[r["problem_id"]].solved) for r in rows]
    return (f"against {sum(guided[r['problem_id']].solved for r in rows)}/{len(rows)} for the model-guided tree "
            f"({paired_interval(differences)})")


BLIND_FILES = (BLIND_TABLE, *(folder for seed in BLIND_SEED_RUNS for folder in seed))

FIRST_AVX2 = "first-command/amd-epyc-avx2-2c"
PEERS_AMX = "engines/peers-gsm8k-341-360-amx"
PEERS_AVX512 = "engines/peers-gsm8k-341-360-avx512"


def bench_peers_row(folder: str = PEERS_AMX) -> str:
    """`seed-tot bench --peers`: the default (a) against a tuned llama.cpp server (b)."""
    rows = peers(folder)
    a, b = rows["a"], rows["b"]
    assert a["correct"] == b["correct"]
    return (f"{ratio(a['problems_per_hour'] / b['problems_per_hour'])} problems per hour ({a['problems_per_hour']} against "
            f"{b['problems_per_hour']}), {ratio(a['tokens_per_s'] / b['tokens_per_s'])} tokens/s, first answer after "
            f"{a['first_answer_s']:.1f} s against {b['first_answer_s']:.1f} s, {a['correct']}/{a['problems']} right each, "
            f"at {ratio(a['peak_rss_mib'] / b['peak_rss_mib'])} its memory")
FIRST_AMX = "first-command/intel-xeon-amx-2c"
FIRST_AVX512 = "first-command/amd-epyc-avx512-2c"


def first_command_pull(folder: str = FIRST_AVX512) -> str:
    """Wall time of a stored /usr/bin/time -v run of `seed-tot models pull` on an empty cache."""
    return f"{time_v(f'{folder}/pull.stderr')[0]:.0f} s of `seed-tot models pull`"


def first_command_stopped(folder: str = FIRST_AVX512) -> str:
    """How many of a stored first run's chains ended, and its tokens, from its trace."""
    with gzip.open(RESULTS / folder / "cached" / "traces" / "gsm8k-1.json.gz", "rt") as handle:
        chains = [node for node in json.load(handle)["nodes"] if node.get("kind") == "answer"]
    ended = sum(node["info"].get("finish_reason") != "cancelled" for node in chains)
    return f"settled with {ended} of the {len(chains)} chains ended"


def first_command_choice(folder: str = FIRST_AVX2, winner: str = "llama-cpp",
                         other: str = "batched-lookup float32") -> str:
    """The chosen path's and another path's speeds in a stored first run's calibration record."""
    [record] = (RESULTS / folder / "calibration").glob("*.json")
    speeds = {t["label"]: t.get("tokens_per_second") for t in json.loads(record.read_text())["timings"]}
    name = {"llama-cpp": "llama.cpp"}
    if winner == "llama-cpp":
        return f"llama.cpp {speeds[winner]:.1f} tokens/s against {speeds[other]:.1f} in process"
    return f"in process {speeds[winner]:.1f} tokens/s against {name.get(other, other)}'s {speeds[other]:.1f}"


def first_command_time(run: str, folder: str = FIRST_AVX2) -> str:
    """Wall time and peak memory of a stored /usr/bin/time -v run of the first command."""
    seconds, peak_mib = time_v(f"{folder}/{run}.stderr")
    peak_gib = peak_mib / 1024
    tail = " the first time" if run == "first" else " once it"
    return f"{seconds:.0f} s and {peak_gib:.1f} GiB{' peak' if run == 'first' else ''}{tail}"


def first_command_tokens(run: str = "cached", folder: str = FIRST_AVX2) -> str:
    """The tokens a stored run of the first command generated for its problem."""
    [record] = [json.loads(line) for line in (RESULTS / folder / run / "results.jsonl").read_text().splitlines()]
    return f"{record['new_tokens']:,} tokens take"


README_ROWS = {
    "gsm8k43": "GSM8K, held-out problems 43-100",
    "gsm8k161": "GSM8K, fresh test problems 161-220",
    "bw": "Blocksworld instances 41-60",
    "blind": "how much of that is the model's",
    "bfs": "the simulator's plain breadth-first search over legal moves",
    "expansion": "one tree expansion (3 thoughts)",
    "twelve": "12 GSM8K problems searched together",
    "engines": "the in-process default against a tuned llama.cpp server",
    "engines_amx": "on an Intel Xeon with AMX (2 cores), `seed-tot bench --peers`",
    "engines_avx512": "on an AMD EPYC with AVX-512 BF16 (2 cores), `seed-tot bench --peers`",
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
    Claim(README, R["gsm8k161"], "45.8/60 at 1,986 tokens per problem", escalated_161_220, ESCALATION_VALUES),
    Claim(README, R["gsm8k161"], "+5.1 points [+0.6, +10.8]", escalated_161_220_interval, ESCALATION_VALUES),
    Claim(README, R["bw"], "14/20 / 7/20 / 1/20", blocksworld_41_60,
          ("blocksworld-41-60/mcts-choose", "blocksworld-41-60/choose")),
    Claim(README, R["blind"], "model-guided 27/40 / 16/40", model_guided_10_iterations,
          ("blocksworld-41-60/mcts-choose", "blocksworld-61-80/mcts-choose", "blocksworld-blind/step8/mcts-choose",
           "blocksworld-blind/step8/mcts-choose-11-40")),
    Claim(README, R["blind"], "blind 23.95/40 / 11.85/40 (expected over 20 seeds)", blind_expectation,
          BLIND_FILES + GUIDED_80),
    Claim(README, R["blind"], "+9.0 points [+0.2, +17.8]", blind_difference, BLIND_FILES + GUIDED_80),
    Claim(README, R["blind"], "over the 80 instances", instances_pooled,
          ("blocksworld-41-60/mcts-choose", "blocksworld-61-80/mcts-choose", "blocksworld-blind/step8/mcts-choose",
           "blocksworld-blind/step8/mcts-choose-11-40")),
    Claim(README, R["blind"], "blind with 30 / 100 iterations solves 33/40 / 27/40", blind_more_iterations,
          ("blocksworld-blind/iterations-30", "blocksworld-blind/step8/mcts-blind-iterations-100",
           "blocksworld-blind/step8/mcts-blind-iterations-100-11-40")),
    Claim(README, R["bfs"], "80/80 solved, every plan optimal", plain_bfs_solved, (PLAIN_BFS,)),
    Claim(README, R["bfs"], "in 3.4 s of search for the 80", plain_bfs_seconds, (PLAIN_BFS,)),
    Claim(README, R["bfs"], "against 43/80 for the model-guided tree (+46.2 points [+35.0, +57.5])",
          plain_bfs_against_guided, (PLAIN_BFS, *GUIDED_80)),
    Claim(README, R["expansion"], "4.66x (T 0.2), 2.90x (T 1.0)", one_expansion,
          ("bench_executors_all_methods/bench_executors.json",)),
    Claim(README, R["expansion"], "6.31x (T 0.2), 4.32x (T 1.0)", lambda: one_expansion("bench_executors_expansion_avx512"),
          ("bench_executors_expansion_avx512/bench_executors.json",)),
    Claim(README, R["expansion"], "on an AMD EPYC with AVX-512 BF16, bfloat16",
          lambda: expansion_machine("bench_executors_expansion_avx512"),
          ("bench_executors_expansion_avx512/bench_executors.json", "bench_executors_expansion_avx512/records.jsonl.gz")),
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
    Claim(README, R["engines_amx"], "4.17x problems per hour (251.9 against 60.4), 4.14x tokens/s, first answer after "
          "97.6 s against 479.0 s, 12/20 right each, at 1.69x its memory", bench_peers_row, (f"{PEERS_AMX}/summary.json",)),
    Claim(README, R["engines_avx512"], "2.33x problems per hour (153.7 against 65.9), 2.05x tokens/s, first answer after "
          "163.2 s against 590.9 s, 13/20 right each, at 1.63x its memory", lambda: bench_peers_row(PEERS_AVX512),
          (f"{PEERS_AVX512}/summary.json",)),
    Claim(README, R["engines_avx512"], "decoded 12% fewer tokens",
          lambda: f"decoded {1 - peer_ratio(PEERS_AVX512, 'new_tokens', 'a', 'b'):.0%} fewer tokens",
          (f"{PEERS_AVX512}/summary.json",)),
    Claim(README, "AMD EPYC with AVX2 only, `auto` measured", "llama.cpp 16.7 tokens/s against 15.8 in process",
          first_command_choice, (f"{FIRST_AVX2}/calibration",)),
    Claim(README, "AMD EPYC with AVX2 only, `auto` measured", "190 s and 6.4 GiB peak the first time",
          lambda: first_command_time("first"), (f"{FIRST_AVX2}/first.stderr",)),
    Claim(README, "AMD EPYC with AVX2 only, `auto` measured", "110 s and 1.9 GiB once it",
          lambda: first_command_time("cached"), (f"{FIRST_AVX2}/cached.stderr",)),
    Claim(README, "AMD EPYC with AVX2 only, `auto` measured", "1,437 tokens take", first_command_tokens,
          (f"{FIRST_AVX2}/cached/results.jsonl",)),
    Claim(README, "AMD EPYC with AVX-512 BF16, `auto` measured", "in process 43.6 tokens/s against llama.cpp's 26.7",
          lambda: first_command_choice(FIRST_AVX512, "batched-lookup bfloat16", "llama-cpp"),
          (f"{FIRST_AVX512}/calibration",)),
    Claim(README, "AMD EPYC with AVX-512 BF16, `auto` measured", "129 s and 7.3 GiB peak the first time",
          lambda: first_command_time("first", FIRST_AVX512), (f"{FIRST_AVX512}/first.stderr",)),
    Claim(README, "AMD EPYC with AVX-512 BF16, `auto` measured", "68 s and 3.6 GiB once it",
          lambda: first_command_time("cached", FIRST_AVX512), (f"{FIRST_AVX512}/cached.stderr",)),
    Claim(README, "AMD EPYC with AVX-512 BF16, `auto` measured", "98 s of `seed-tot models pull`", first_command_pull,
          (f"{FIRST_AVX512}/pull.stderr",)),
    Claim(README, "AMD EPYC with AVX-512 BF16, `auto` measured", "settled with 4 of the 5 chains ended",
          first_command_stopped, (f"{FIRST_AVX512}/cached/traces/gsm8k-1.json.gz",)),
    Claim(README, "AMD EPYC with AVX-512 BF16, `auto` measured", "1,125 tokens; [stored",
          lambda: first_command_tokens("cached", FIRST_AVX512)[:-len(" take")] + "; [stored",
          (f"{FIRST_AVX512}/cached/results.jsonl",)),
    Claim(README, "Intel Xeon with AMX, `auto` measured", "in process 44.4 tokens/s against llama.cpp's 26.6",
          lambda: first_command_choice(FIRST_AMX, "batched-lookup bfloat16", "llama-cpp"), (f"{FIRST_AMX}/calibration",)),
    Claim(README, "Intel Xeon with AMX, `auto` measured", "116 s and 7.3 GiB peak the first time",
          lambda: first_command_time("first", FIRST_AMX), (f"{FIRST_AMX}/first.stderr",)),
    Claim(README, "Intel Xeon with AMX, `auto` measured", "50 s and 3.6 GiB once it",
          lambda: first_command_time("cached", FIRST_AMX), (f"{FIRST_AMX}/cached.stderr",)),
)


def claims_of(doc: str) -> list[Claim]:
    return [c for c in all_claims() if c.doc == doc]


# ----------------------------------------------------------------------------- results/README.md: reasoning quality

QUALITY_TABLE = "### Reasoning quality"
SPEED_TABLE = "### Speed and memory"
BOOTSTRAP_RESAMPLES = 10_000


def bound(value: float, digits: int = 1, zero: str | None = None) -> str:
    """One end of an interval in points as the page writes it (`zero` where the page writes 0 its own way)."""
    return zero if zero is not None and abs(value) < 1e-12 else points(value, digits)


@lru_cache(maxsize=None)
def bootstrap(differences: tuple[float, ...]) -> tuple[float, float]:
    """The 95% paired bootstrap interval `seed-tot report` and the scripts print (10,000 resamples, seed 0)."""
    from seed_tot.observe.paired_stats import paired_bootstrap

    return paired_bootstrap(list(differences), BOOTSTRAP_RESAMPLES)


def paired_interval(differences: list[float], digits: int = 1, zero: str | None = None) -> str:
    """'+D points [+L, +H]': the mean difference and its 95% paired bootstrap (10,000 resamples, seed 0)."""
    low, high = bootstrap(tuple(differences))
    mean = sum(differences) / len(differences)
    return f"{points(mean, digits)} points [{bound(low, digits, zero)}, {bound(high, digits, zero)}]"


def by_problem(folder: str) -> dict:
    return {r.problem.id: r for r in tree_run(folder)}


def report_order(ids) -> list[str]:
    """Problem ids in the order `seed-tot report` pairs them (shorter ids first, then by name)."""
    return sorted(ids, key=lambda pid: (len(pid), pid))


def rule_differences(later: str, earlier: str, rule: str = "final", earlier_rule: str | None = None) -> list[float]:
    a, b = by_problem(later), by_problem(earlier)
    return [float(a[pid].correct[rule]) - float(b[pid].correct[earlier_rule or rule]) for pid in report_order(set(a) & set(b))]


def pool_vote_of(folder: str, k: int, ids: set[str] | None = None, arithmetic_check: bool = True) -> float:
    """The plain vote of k sampled chains summed over the pool's problems (those in `ids`, where given)."""
    return sum(vote_by_counts(answers, correct, k) for pid, (answers, correct) in pool_votes(folder, arithmetic_check).items()
               if ids is None or pid in ids)


def pool_tokens_of(folder: str, k: int, ids: set[str] | None = None) -> float:
    per = [k * sum(r.stats.new_tokens for r in p.samples) / len(p.samples)
           for pid, p in pool(folder).items() if ids is None or pid in ids]
    return sum(per) / len(per)


POOL_43_100, POOL_101_160, POOL_161_220 = ("heldout-gsm8k-43-100/cot-pool", "heldout-gsm8k-101-160/cot-pool",
                                           "heldout-gsm8k-161-220/cot-pool")
TREE_43_100 = "heldout-gsm8k-43-100/tree-bfs-logits-path"


def heldout_43_100_row() -> str:
    n = len(tree_run(TREE_43_100))
    sc = [f"{pool_vote(POOL_43_100, k):.2f}/{n} at {tokens(pool_tokens(POOL_43_100, k))}" for k in (8, 16)]
    own = paired_interval(rule_differences(TREE_43_100, TREE_43_100, "final", "cot_vote"), zero="0")
    return (gsm8k_43_100().replace(" tokens per problem", " tokens") + " / " + " / ".join(sc)
            + f"; tree vs its own chains {own.replace(' points [', ' points, 95% paired bootstrap [')}"
            f"; without the chains the search's own choice {rule_correct(TREE_43_100, 'search')}/{n}, "
            f"its answer leaves' vote {rule_correct(TREE_43_100, 'tree_vote')}/{n}; greedy chain {rule_correct(TREE_43_100, 'cot')}/{n}")


def plain_votes(folder: str, ks: Sequence[int], sep: str = " / ") -> str:
    return sep.join(f"{pool_vote(folder, k):.2f}" for k in ks)


MCTS_LEARNED = "heldout-gsm8k-43-100/mcts-learned-value"


def mcts_learned_row() -> str:
    reports = tree_run(MCTS_LEARNED)
    n = len(reports)
    ids = {r.problem.id for r in reports}
    tree_tokens = sum(r.tree_tokens + r.sample_tokens for r in reports) / n
    chain_tokens = sum(r.chain_tokens for r in reports) / n
    return (f"{rule_correct(MCTS_LEARNED, 'final')}/{n} at {tokens(tree_tokens)} tokens per problem (one vote per path "
            f"{sum(r.path_vote_correct for r in reports)}/{n}); its chains' vote alone {rule_correct(MCTS_LEARNED, 'cot_vote')}/{n} "
            f"at {tokens(chain_tokens)}; self-consistency of 8 {pool_vote_of(POOL_43_100, 8, ids):.2f}/{n} at "
            f"{tokens(pool_tokens_of(POOL_43_100, 8, ids))}")


def final_and_cot(folder: str) -> str:
    n = len(tree_run(folder))
    return f"{rule_correct(folder, 'final')}/{n} / {rule_correct(folder, 'cot')}/{n}"


def gsm8k_31_42() -> str:
    return f"{final_and_cot('gsm8k-31-42')} (bfloat16); {final_and_cot('gsm8k-31-42-float16')} (float16)"


BW_MCTS, BW_BFS = "blocksworld-41-60/mcts-choose", "blocksworld-41-60/choose"


def blocksworld_41_60_row() -> str:
    n = len(tree_run(BW_BFS))
    mcts_bfs = paired_interval(rule_differences(BW_MCTS, BW_BFS), digits=0)
    bfs_chains = paired_interval(rule_differences(BW_BFS, BW_BFS, "final", "cot_vote"), digits=0)
    return (f"{blocksworld_41_60()} / {rule_correct(BW_BFS, 'cot')}/{n}; MCTS vs BFS {mcts_bfs}; "
            f"BFS vs its chains' vote {bfs_chains.replace(' points', '')}")


def blocksworld_21_40_row() -> str:
    """The two searches by themselves (the tree alone: the search's own choice, no chains)."""
    mcts, bfs = "blocksworld-21-40/mcts-choose-bfloat16", "blocksworld-21-40/choose-bfloat16"
    n = len(tree_run(bfs))
    against = paired_interval(rule_differences(mcts, bfs, "search"), digits=0).replace(" points", "")
    return f"MCTS {rule_correct(mcts, 'search')}/{n}, BFS {rule_correct(bfs, 'search')}/{n} ({against})"


STEP8 = "blocksworld-blind/step8"


def step8(name: str) -> tuple[str, str]:
    return f"{STEP8}/{name}", f"{STEP8}/{name}-11-40"


def step8_outcomes(name: str) -> dict:
    _scripts_on_path()
    from blocksworld_blind import outcomes

    return outcomes([RESULTS / f for f in step8(name)])


def search_seconds(*folders: str) -> float:
    """Wall seconds of the runs' own clocks (runs.jsonl), summed over the folders."""
    return sum(json.loads(line)["wall_seconds"] for f in folders
               for line in (RESULTS / f / "runs.jsonl").read_text().splitlines() if line.strip())


def blocksworld_step8_row() -> str:
    guided = blocksworld_solved(*step8("mcts-choose"))
    blind = [blocksworld_solved(*step8(name))[0] for name in ("mcts-blind", "mcts-blind-seed1", "mcts-blind-seed2")]
    thirty, hundred = blocksworld_solved(*step8("mcts-blind-iterations-30")), blocksworld_solved(*step8("mcts-blind-iterations-100"))
    model, more = step8_outcomes("mcts-choose"), step8_outcomes("mcts-blind-iterations-100")
    differences = [float(more[i].solved) - float(model[i].solved) for i in sorted(set(model) & set(more))]
    n = guided[1]
    return (f"{guided[0]}/{n} against {' / '.join(map(str, blind))} of {n}; {thirty[0]}/{n} / {hundred[0]}/{n} "
            f"(blind 100 iterations - model-guided: {paired_interval(differences)}); "
            f"{search_seconds(*step8('mcts-choose')):,.0f} s of search against "
            f"{search_seconds(*step8('mcts-blind-iterations-100')):,.0f} s")


def blind_20_model_side() -> str:
    six = blocksworld_solved("blocksworld-41-60/mcts-choose", "blocksworld-61-80/mcts-choose")
    eight = blocksworld_solved(*step8("mcts-choose"))
    return f"{six[0]}/{six[1]} against", f"{eight[0]}/{eight[1]} against", f"{six[0] + eight[0]}/{six[1] + eight[1]} against"


def blind_20_stored() -> str:
    rows = blind_rows()
    six, eight, both = rows["optimal plan 6 steps"], rows["optimal plan 8 steps"], rows["all"]
    low, high = both["ci95"]
    return (f"against {six['blind_expected']:.2f} / {eight['model_solved']}/{eight['n']} against {eight['blind_expected']:.2f} / "
            f"{both['model_solved']}/{both['n']} against {both['blind_expected']:.2f}: "
            f"{points(both['model_minus_blind'])} points [{points(low)}, {points(high)}]")


Q = {
    "43-100": "held-out GSM8K 43-100 (float16; 93-100",
    "72p-101": "fresh GSM8K test problems 101-160 (greedy + 8 samples each), the learned judge trained on 72",
    "72p-43": "held-out GSM8K 43-100 with 16 samples each, the 72-problem judge",
    "216p": "held-out GSM8K 43-100 (greedy + 16 samples) / fresh 101-160 (greedy + 8 samples), the learned judge trained on 216",
    "266p": "held-out GSM8K 43-100 (greedy + 16 samples) / fresh 101-160 (greedy + 8 samples), the packaged learned judge (266",
    "escalate": "the second round where the judged vote is unsure",
    "mcts-judge": "GSM8K MCTS with the learned judge",
    "branched": "the second round grown as branches",
    "161-judge": "fresh GSM8K 161-220 (greedy + 8 samples), the packaged 266-problem judge",
    "curve": "the judge's learning curve",
    "head-cv": "which head reads whole chains best, chosen by 5-fold cross-validation",
    "1-30": "GSM8K problems 1-30",
    "31-42": "GSM8K problems 31-42",
    "bw41": "Blocksworld instances 41-60",
    "bw21": "Blocksworld instances 21-40",
    "step8": "Blocksworld, the model's share: model-guided MCTS",
    "blind20": "Blocksworld, the model's share against the blind tree's expectation",
}

JUDGED = ("this judge read the chains in float32, and the stored values (value-gsm8k/judge-values*) are of "
          "bfloat16 readings: the float32 figures need the target to read the chains again")
CURVE = "the learning curve refits heads on the training features in runs/value-gsm8k-s12, which do not ship"

BRANCHED_FILE = "value-gsm8k/branched_escalation.json"


def branched_row() -> str:
    """The 178 held-out problems' outcomes stored per problem by scripts/branched_escalation.py
    (each arm's credit and new tokens), summed and compared the way the script compares them."""
    from seed_tot.observe.paired_stats import paired_bootstrap

    found = stored_json(BRANCHED_FILE)["per_problem"]
    n = len(found)

    def arm(name: str) -> str:
        return f"{count(sum(p[name][0] for p in found))}/{n} at {tokens(sum(p[name][1] for p in found) / n)}"

    differences = [p["branched"][0] - p["fresh"][0] for p in found]
    low, high = paired_bootstrap(differences, BOOTSTRAP_RESAMPLES)
    return (f"{arm('branched')} tokens against {arm('fresh')} ({points(sum(differences) / n)} points "
            f"[{points(low)}, {points(high)}]); one round {arm('one_round')}")


def one_round_161_220() -> str:
    """The one-round judged vote (greedy + 4 samples, one vote order) on 161-220, from the per-problem outcomes."""
    found = [p for p in stored_json(BRANCHED_FILE)["per_problem"] if 161 <= int(p["problem_id"].rsplit("-", 1)[1]) <= 220]
    return f"on 161-220 samples 1-4 alone give {sum(p['one_round'][0] for p in found):.2f}/{len(found)}"


TWO_ROUNDS = "escalating vote, up to 2 round(s)"


def escalated(pool: str) -> tuple[str, str, str]:
    row = escalation_study()[pool][TWO_ROUNDS]
    low, high = row["ci95"]
    return f"{row['correct']:.2f}/{row['problems']}", tokens(row["tokens"]), f"{points(row['minus_vote_of_8'])} [{points(low)}, {points(high)}]"


def escalation_derived() -> str:
    first = escalated(HELD_43)
    second = escalated(HELD_101)
    third = escalated(HELD_161)
    return (f"{first[0]} at {first[1]} tokens ({first[2].replace(' [', ' points [')}) / {second[0]} at {second[1]} "
            f"({second[2]}) / {third[0]} at {third[1]}")


HEAD_CV = "value-gsm8k/head_cv.json"


def head_cv_row() -> str:
    """scripts/judge_head_cv.py's stored comparison: the cross-validated figures, the held-out ones and the vote of 8."""
    found = stored_json(HEAD_CV)
    grid = {row["name"]: row["cv_chain_auroc_within"] for row in found["grid"]}
    agreement = next(row["cv_chain_auroc_within"] for row in found["grid"] if not row["eligible"])
    held = list(found["heldout"].values())
    packaged = " / ".join(f"{h['packaged form']['chain_auroc_within']:.4f}" for h in held)
    chosen = " / ".join(f"{h['best eligible']['chain_auroc_within']:.4f}" for h in held)
    votes = [sum(h[name]["weighted_vote_8"] for h in held) for name in ("packaged form", "best eligible")]
    plain = sum(h["packaged form"]["plain_vote_8"] for h in held)
    stays = votes[1] < votes[0] and found["chosen"] != found["packaged_form"]
    return (f"{grid[found['packaged_form']]:.4f} / {grid[found['best_eligible']]:.4f} / {agreement:.4f}; {packaged} against "
            f"{chosen}; {votes[0]:.2f} against {votes[1]:.2f} (plain vote of 8: {plain:.2f})"
            + (": the chosen head loses held out, so the packaged head stays" if stays else ""))


def one_round_derived() -> str:
    rows = [escalation_study()[pool]["escalating vote, up to 1 round(s)"] for pool in (HELD_43, HELD_101, HELD_161)]
    return "the one-round judged vote " + " / ".join(f"{row['correct']:.2f}" for row in rows)


def judged(row: str, *texts: str, files: tuple[str, ...]) -> list[Claim]:
    return [Claim(RESULTS_README, row, text, not_derivable=JUDGED, files=files) for text in texts]


def stored_auroc(*paths: str, digits: tuple[int, ...] = ()) -> Callable[[], str]:
    """The chain AUROC within a problem that stored judge reports give, each to the digits the page uses."""
    def read() -> str:
        values = [stored_json(path)["heldout"]["chain_auroc_within"] for path in paths]
        return " / ".join(f"{v:.{d}f}" for v, d in zip(values, digits or (3,) * len(values), strict=True))
    return read


def judged_auroc(row: str, text: str, *paths: str, digits: tuple[int, ...] = ()) -> Claim:
    return Claim(RESULTS_README, row, text, not_derivable=JUDGED, files=paths, stored=stored_auroc(*paths, digits=digits))


JUDGE_72_101 = ("heldout-gsm8k-101-160/judge_report_72_problems.json",)

QUALITY_CLAIMS: tuple[Claim, ...] = (
    Claim(RESULTS_README, Q["43-100"], "42/58 at 1,338 tokens / 40/58 at 2,555 / 41.74/58 at 2,139 / 41.50/58 at 4,278; "
          "tree vs its own chains -3.4 points, 95% paired bootstrap [-8.6, 0]; without the chains the search's own choice "
          "22/58, its answer leaves' vote 23/58; greedy chain 35/58", heldout_43_100_row, (TREE_43_100, POOL_43_100)),
    Claim(RESULTS_README, Q["72p-101"], "37.80/60 / 41.75/60", lambda: f"{pool_vote(POOL_101_160, 4):.2f}/60 / "
          f"{pool_vote(POOL_101_160, 8):.2f}/60", (POOL_101_160,)),
    *judged(Q["72p-101"], "40.53/60", "weighted - plain at 4: +4.5 points [+1.7, +7.6]", files=JUDGE_72_101),
    judged_auroc(Q["72p-101"], "0.738", *JUDGE_72_101),
    *(Claim(RESULTS_README, Q["72p-43"], f"/ {v}", (lambda k=k: f"/ {pool_vote(POOL_43_100, k):.2f}"), (POOL_43_100,))
      for k, v in ((4, "39.52"), (8, "41.74"), (16, "41.50"))),
    Claim(RESULTS_README, Q["72p-43"], "(of 58)", lambda: f"(of {len(pool(POOL_43_100))})", (POOL_43_100,)),
    *(Claim(RESULTS_README, Q["72p-43"], text, (lambda k=k: weighted_vote(HELD_43, k, VALUES_72)), (f"{VALUES_72}/",))
      for k, text in ((4, "41.01"), (8, "42.73"), (16, "43.00"))),
    Claim(RESULTS_README, Q["72p-43"], "weighted - plain at 16: +2.6 points [+0.0, +6.0]",
          lambda: f"weighted - plain at 16: {weighted_gain(HELD_43, 16, VALUES_72).replace(' [', ' points [')}",
          (f"{VALUES_72}/",)),
    Claim(RESULTS_README, Q["72p-43"], "0.775", lambda: values_auroc("chain_auroc_within", HELD_43, values=VALUES_72),
          (f"{VALUES_72}/",)),
    Claim(RESULTS_README, Q["216p"], "/ 39.52 / 41.74 of 58", lambda: f"/ {plain_votes(POOL_43_100, (4, 8))} of 58", (POOL_43_100,)),
    Claim(RESULTS_README, Q["216p"], "/ 37.80 / 41.75 of 60", lambda: f"/ {plain_votes(POOL_101_160, (4, 8))} of 60", (POOL_101_160,)),
    Claim(RESULTS_README, Q["216p"], "0.8225 / 0.827",
          lambda: values_auroc("chain_auroc_within", HELD_43, HELD_101, digits=(4, 3), values=VALUES_216), (f"{VALUES_216}/",)),
    Claim(RESULTS_README, Q["216p"], "41.25 / 39.52", lambda: f"{weighted_vote(HELD_43, 4, VALUES_216)} / 39.52",
          (f"{VALUES_216}/",)),
    Claim(RESULTS_README, Q["216p"], "41.31 / 37.80", lambda: f"{weighted_vote(HELD_101, 4, VALUES_216)} / 37.80",
          (f"{VALUES_216}/",)),
    Claim(RESULTS_README, Q["216p"], "+2.8 points [+0.6, +5.5] / +3.8 [+0.0, +8.8]",
          lambda: f"{weighted_gain(HELD_43, 8, VALUES_216).replace(' [', ' points [')} / {weighted_gain(HELD_101, 8, VALUES_216)}",
          (f"{VALUES_216}/",)),
    Claim(RESULTS_README, Q["266p"], "/ 39.52 / 41.74 of 58", lambda: f"/ {plain_votes(POOL_43_100, (4, 8))} of 58", (POOL_43_100,)),
    Claim(RESULTS_README, Q["266p"], "/ 37.80 / 41.75 of 60", lambda: f"/ {plain_votes(POOL_101_160, (4, 8))} of 60", (POOL_101_160,)),
    Claim(RESULTS_README, Q["266p"], "0.8415 / 0.8345",
          lambda: values_auroc("chain_auroc_within", HELD_43, HELD_101, digits=(4, 4)), VALUES_HELD[:2]),
    Claim(RESULTS_README, Q["266p"], "41.45 / 39.52", lambda: f"{weighted_vote(HELD_43, 4)} / 39.52", VALUES_HELD[:1]),
    Claim(RESULTS_README, Q["266p"], "41.31 / 37.80", lambda: f"{weighted_vote(HELD_101, 4)} / 37.80", VALUES_HELD[1:2]),
    Claim(RESULTS_README, Q["266p"], "+2.9 points [+0.8, +5.5] / +3.8 [+0.0, +8.8]",
          lambda: f"{weighted_gain(HELD_43, 8).replace(' [', ' points [')} / {weighted_gain(HELD_101, 8)}", VALUES_HELD[:2]),
    Claim(RESULTS_README, Q["escalate"], "against 42.75 at 2,321",
          lambda: f"against {pool_vote(POOL_161_220, 8):.2f} at {tokens(pool_tokens(POOL_161_220, 8))}", (POOL_161_220,)),
    Claim(RESULTS_README, Q["escalate"], "43.72/58 at 1,735 tokens (+3.4 points [+0.4, +6.9]) / 43.87/60 at 1,949 "
          "(+3.5 [+0.3, +8.0]) / 45.79/60 at 1,986", escalation_derived, ESCALATION_VALUES),
    Claim(RESULTS_README, Q["escalate"], "the one-round judged vote 42.15 / 41.49 / 44.56", one_round_derived,
          ESCALATION_VALUES),
    Claim(RESULTS_README, Q["escalate"], "(+5.1 [+0.6, +10.8])", lambda: f"({escalated(HELD_161)[2]})", ESCALATION_VALUES),
    Claim(RESULTS_README, Q["escalate"], "(threshold 0.7 chosen on training problems)",
          lambda: f"(threshold {escalation_study()['threshold']} chosen on training problems)", ESCALATION_VALUES),
    Claim(RESULTS_README, Q["escalate"], "on 161-220 samples 1-4 alone give 46.00/60", one_round_161_220, (BRANCHED_FILE,)),
    Claim(RESULTS_README, Q["mcts-judge"], "4/10 at 10,379 tokens per problem (one vote per path 6/10); its chains' vote "
          "alone 7/10 at 1,497; self-consistency of 8 6.61/10 at 2,362", mcts_learned_row, (MCTS_LEARNED, POOL_43_100)),
    Claim(RESULTS_README, Q["branched"], "129/178 at 1,652 tokens against 135/178 at 1,885 (-3.4 points [-7.9, +1.1]); "
          "one round 131/178 at 1,407", branched_row, (BRANCHED_FILE,)),
    Claim(RESULTS_README, Q["161-judge"], "0.768", lambda: values_auroc("chain_auroc_within", HELD_161), VALUES_HELD[2:]),
    Claim(RESULTS_README, Q["161-judge"], "+3.8 points [-0.4, +9.2]",
          lambda: weighted_gain(HELD_161, 8).replace(" [", " points ["), VALUES_HELD[2:]),
    Claim(RESULTS_README, Q["head-cv"], "0.7737 / 0.7873 / 0.8317; 0.8415 / 0.8345 / 0.7676 against 0.7959 / 0.7899 / "
          "0.7547; 132.39 against 128.45 (plain vote of 8: 126.24): the chosen head loses held out, so the packaged head "
          "stays", head_cv_row, (HEAD_CV,)),
    Claim(RESULTS_README, Q["curve"], "0.793 / 0.817 / 0.822 (43-100), 0.796 / 0.816 / 0.827 (101-160)",
          not_derivable=CURVE, files=("value-gsm8k/learning_curve_216_problems.json",)),
    Claim(RESULTS_README, Q["1-30"], "14/30 / 17/30", lambda: final_and_cot("quality-gsm8k"), ("quality-gsm8k",)),
    Claim(RESULTS_README, Q["31-42"], "9/12 / 8/12 (bfloat16); 9/12 / 7/12 (float16)", gsm8k_31_42,
          ("gsm8k-31-42", "gsm8k-31-42-float16")),
    Claim(RESULTS_README, Q["bw41"], "14/20 / 7/20 / 1/20 / 1/20; MCTS vs BFS +35 points [+15, +55]; BFS vs its chains' "
          "vote +30 [+10, +50]", blocksworld_41_60_row, (BW_MCTS, BW_BFS)),
    Claim(RESULTS_README, Q["bw21"], "MCTS 15/20, BFS 4/20 (+55 [+35, +75])", blocksworld_21_40_row,
          ("blocksworld-21-40/mcts-choose-bfloat16", "blocksworld-21-40/choose-bfloat16")),
    Claim(RESULTS_README, Q["step8"], "16/40 against 11 / 12 / 16 of 40; 19/40 / 27/40 (blind 100 iterations - "
          "model-guided: +27.5 points [+10.0, +45.0]); 2,143 s of search against 15 s", blocksworld_step8_row, (STEP8,)),
    Claim(RESULTS_README, Q["blind20"], "27/40 against", lambda: blind_20_model_side()[0],
          ("blocksworld-41-60/mcts-choose", "blocksworld-61-80/mcts-choose")),
    Claim(RESULTS_README, Q["blind20"], "against 23.95 / 16/40 against 11.85 / 43/80 against 35.80: +9.0 points [+0.2, +17.8]",
          blind_20_stored, BLIND_FILES + GUIDED_80),
)


# The tables each page states its figures in: (heading, index of the result cell).
TABLES = {README: (("## What it achieves", -1),), RESULTS_README: ((QUALITY_TABLE, 1), (SPEED_TABLE, 1))}


def judge_aurocs(field: str) -> list[float]:
    """A measure of the packaged judge on the three held-out pools, from its stored values."""
    return [judge_report(pool)[0]["heldout"][field] for pool in HELDOUT_SAMPLES]


def chain_aurocs() -> str:
    first, second, third = judge_aurocs("chain_auroc_within")
    return f"chain AUROC within a problem {first:.2f}, {second:.2f} and {third:.2f}"


def step_aurocs() -> str:
    found = judge_aurocs("step_auroc_within")
    return f"partial steps at {min(found):.2f}-{max(found):.2f}"


def tree_against_its_chains() -> str:
    reports = tree_run(TREE_43_100)
    n = len(reports)
    own = paired_interval(rule_differences(TREE_43_100, TREE_43_100, "final", "cot_vote"), zero="0")
    return (f"the tree's final answer got {rule_correct(TREE_43_100, 'final')}/{n} at "
            f"{tokens(sum(r.tree_tokens + r.sample_tokens for r in reports) / n)} tokens per problem, the vote of the same "
            f"run's five chains {rule_correct(TREE_43_100, 'cot_vote')}/{n} at {tokens(sum(r.chain_tokens for r in reports) / n)} "
            f"({own.replace(' points [', ' points, 95% paired bootstrap [')})")


def bfs_against_its_chains() -> str:
    n = len(tree_run(BW_BFS))
    against = paired_interval(rule_differences(BW_BFS, BW_BFS, "final", "cot_vote"), digits=0).replace(" [", ", [")
    return (f"the BFS tree of chosen moves answered {rule_correct(BW_BFS, 'final')}/{n} against "
            f"{rule_correct(BW_BFS, 'cot_vote')}/{n} for its chains' vote ({against}")


def mcts_against_bfs() -> str:
    n = len(tree_run(BW_BFS))
    against = paired_interval(rule_differences(BW_MCTS, BW_BFS), digits=0).replace(" points [", ", [")
    same_machine = search_seconds(BW_MCTS) / search_seconds("blocksworld-41-60/choose-bfloat16")
    return (f"MCTS over the same moves solved {rule_correct(BW_MCTS, 'search')}/{n} by itself against "
            f"{rule_correct(BW_BFS, 'final')}/{n} for the BFS tree ({against}) at about {ratio(same_machine, 1)} its time")


def chosen_against_sampled() -> str:
    chosen, sampled = "blocksworld-21-40/choose", "blocksworld-21-40/sample"
    n = len(tree_run(chosen))
    greedy = {rule_correct(f, "cot") for f in (chosen, sampled)}
    (greedy,) = greedy
    alone = rule_correct(sampled, "search")
    both = "for sampled thoughts and for the greedy chain" if alone == greedy else f"for sampled thoughts, {greedy}/{n} for the greedy chain"
    return f"the chosen-moves tree alone solved {rule_correct(chosen, 'search')}/{n} against {alone}/{n} {both}"


def api_paragraph() -> str:
    levels = [("bench_api/bench_api_bf16_c1.json", 1), ("bench_api/bench_api_bf16_c4_c16.json", 4),
              ("bench_api/bench_api_bf16_c4_c16.json", 16)]
    return (", ".join(api_time_change(path, c) for path, c in levels)
            + " time at " + ", ".join(str(c) for _, c in levels) + " requests at once")


ANSWER_TABLE = "on 58 held-out GSM8K problems"
DOCS_CLAIMS: tuple[Claim, ...] = (
    Claim(README, ANSWER_TABLE, "the tree's final answer got 40/58 at 2,555 tokens per problem, the vote of the same "
          "run's five chains 42/58 at 1,338 (-3.4 points, 95% paired bootstrap [-8.6, 0])", tree_against_its_chains,
          (TREE_43_100,)),
    Claim(README, ANSWER_TABLE, "the BFS tree of chosen moves answered 7/20 against 1/20 for its chains' vote "
          "(+30 points, [+10, +50]", bfs_against_its_chains, (BW_BFS,)),
    Claim(README, ANSWER_TABLE, "MCTS over the same moves solved 14/20 by itself against 7/20 for the BFS tree "
          "(+35, [+15, +55]) at about 2.2x its time", mcts_against_bfs,
          (BW_MCTS, BW_BFS, "blocksworld-41-60/choose-bfloat16")),
    Claim(README, "without the list, 6 of 6 first instances", "the chosen-moves tree alone solved 4/20 against 1/20 for "
          "sampled thoughts and for the greedy chain", chosen_against_sampled,
          ("blocksworld-21-40/choose", "blocksworld-21-40/sample")),
    Claim(README, "An OpenAI-compatible endpoint.", "+0.0%, -2.1%, -2.2% time at 1, 4, 16 requests at once", api_paragraph,
          ("bench_api/bench_api_bf16_c1.json", "bench_api/bench_api_bf16_c4_c16.json")),
    Claim(README, "What it does not do well yet", "chain AUROC within a problem 0.84, 0.83 and 0.77",
          chain_aurocs, VALUES_HELD),
    Claim(README, "What it does not do well yet", "token confidence: 0.584 at best, where a tree needs 0.75 here",
          step_confidence_best, ("value-gsm8k/step_confidence.jsonl.gz", "value-gsm8k/step_confidence.md")),
    Claim(README, "What it does not do well yet", "partial steps at 0.60-0.67", step_aurocs, VALUES_HELD),
    Claim("docs/quality.md", "The check matters:", "gets 41.74/58 with it and 41.11/58",
          lambda: f"gets {pool_vote(POOL_43_100, 8):.2f}/58 with it and {pool_vote(POOL_43_100, 8, arithmetic_check=False):.2f}/58",
          (POOL_43_100,)),
)


def all_claims() -> tuple[Claim, ...]:
    return CLAIMS + QUALITY_CLAIMS + SPEED_CLAIMS + DOCS_CLAIMS


# ----------------------------------------------------------------------------- results/README.md: speed and memory


def gib(mib: float, digits: int = 1) -> str:
    return f"{mib / 1024:.{digits}f}"


def expansion_row() -> str:
    folder = "bench_executors_all_methods"
    cells = stored_json(f"{folder}/bench_executors.json")["measurements"]
    n = {c["n"] for c in cells if c["label"] == "seed"}
    (threads,) = n

    def pair(method: str) -> str:
        return " / ".join(ratio(executor_speedup(folder, method, "thought", t)) for t in (0.2, 1.0))

    return (f"`batched-lookup` {pair('batched-lookup-k2')} serial AR; batched AR {pair('batched')}; "
            f"SEED ({threads} draft processes) {pair('seed')}")


def scaling_row() -> str:
    rows = stored_json("bench_executors_scaling/bench_executors.json")["scaling"]
    rate = {(r["method"], r["n"]): r["new_tokens"] / r["seconds"] for r in rows}
    widest = max(n for _, n in rate)
    batched = rate[("batched", widest)] / rate[("ar", widest)]
    seed = [rate[(m, n)] / rate[("ar", n)] for m, n in rate if m.startswith("seed") and n >= 2]
    return (f"batched AR grows to {ratio(batched)} serial AR at n = {widest}; SEED stays at "
            f"{min(seed):.1f}-{ratio(max(seed), 1)} (n = 2..{widest})")


C12 = "bench_concurrency_12_problems"


def concurrency_row() -> str:
    first, rerun, c8 = (f"{C12}/{name}/summary.json" for name in ("float16-c1-4-8-16", "float16-c1-16-rerun", "float16-c1-8"))
    wide = [concurrency_speedup(first, 16), concurrency_speedup(rerun, 16)]
    eight = sorted([concurrency_speedup(first, 8), concurrency_speedup(c8, 8)])
    peaks = sorted(r["peak_rss_mib"] for f in (first, rerun) for r in stored_json(f)["runs"] if r["concurrency"] == 16)
    return (f"{ratio(wide[0])} and {ratio(wide[1])} tokens/s (two invocations), peak RSS {gib(peaks[0])}-{gib(peaks[-1])} GiB; "
            f"C = 8: {eight[0]:.2f}-{ratio(eight[1])}")


def runs_of(path: str) -> list[dict]:
    return stored_json(path)["runs"]


def rounds_row() -> str:
    runs = {(r["concurrency"], r["batching"]): r for r in runs_of("bench_concurrency_rounds_vs_continuous/summary.json")}
    return f"{ratio(runs[(4, 'continuous')]['tokens_per_second'] / runs[(4, 'rounds')]['tokens_per_second'])} tokens/s"


def dtype_row() -> str:
    c8 = {r["dtype"]: r for r in runs_of("bench_c8_prefill_sampling_dtype/float16-vs-bfloat16/summary.json")
          if r["concurrency"] == 8}
    packing = {(r["concurrency"], r["packed_linear_layers"] > 0): r["tokens_per_second"]
               for r in runs_of("bench_packing/summary.json") if r["dtype"] == "bfloat16"}
    packed = [ratio(packing[(c, True)] / packing[(c, False)]) for c in (1, 4)]
    return (f"{ratio(c8['float16']['tokens_per_second'] / c8['bfloat16']['tokens_per_second'])}; "
            f"{packed[0]} at C = 1, {packed[1]} at C = 4")


def draft_dtype_row() -> str:
    """Serial SD and SEED with the bfloat16 draft ('auto') against a float16 one, from the stored log."""
    rates, current = {}, None
    for line in (RESULTS / "bench_draft_dtype/log.txt").read_text().splitlines():
        if line.startswith("=== "):
            current = tuple(line[4:].split(" draft "))
        elif line.startswith("this run:") and current:
            rates[current] = float(re.search(r"([\d.]+) tokens/s", line).group(1))
    return (f"serial SD {ratio(rates[('sd', 'auto')] / rates[('sd', 'float16')])} tokens/s; "
            f"SEED {ratio(rates[('seed', 'auto')] / rates[('seed', 'float16')])}")


def prefill_row() -> str:
    totals = stored_json("bench_prefill_cache.json")["totals"]
    return f"{ratio(totals['none']['seconds'] / totals['cache']['seconds'])} faster than no sharing"


def decoding_row() -> str:
    results = stored_json("bench_decoding/bench_decoding.json")["results"]

    def against_ar(method: str, temperature: str) -> float:
        summary = results[temperature]["summary"]
        return summary[method]["tokens_per_second"] / summary["ar"]["tokens_per_second"]

    sd = {round(against_ar("sd:1,1", t), 2) for t in results}
    mcsd = sorted(against_ar("mcsd:2,2,1", t) for t in results)
    (sd,) = sd
    return f"{ratio(sd)} / {mcsd[0]:.2f}-{ratio(mcsd[-1])} our AR"


def inner_rate(method_prefix: str) -> float:
    rows = [r for r in stored_json("bench_inner/bench_inner.json")["inner"] if r["method"].startswith(method_prefix)]
    return sum(r["new_tokens"] for r in rows) / sum(r["wall_seconds"] for r in rows)


def inner_row() -> str:
    ar = inner_rate("AR")
    return f"lookahead {ratio(inner_rate('lookahead') / ar)} AR, Jacobi {ratio(inner_rate('Jacobi') / ar)}"


def fastcot_row() -> str:
    found = stored_json("bench_inner/bench_inner.json")["fastcot"]
    faster = [found["ar"]["mean_wall_seconds"] / cap["mean_wall_seconds"] for cap in found["fastcot"].values()]
    accuracy = [cap["accuracy"] for cap in found["fastcot"].values()]
    return (f"{min(faster):.0f}-{max(faster):.0f}x faster, but accuracy falls from {found['ar']['accuracy']:.0%} to "
            f"{min(accuracy):.0%}-{max(accuracy):.0%}").replace("0%-", "0-")


def half_up(value: float, digits: int = 1) -> str:
    """A stored figure rounded as a reader rounds its printed digits (half up)."""
    from decimal import ROUND_HALF_UP, Decimal

    return str(Decimal(str(value)).quantize(Decimal(1).scaleb(-digits), rounding=ROUND_HALF_UP))


def tokens_per_s(folder: str, system: str) -> str:
    """A system's stored tokens/s, to one decimal."""
    return half_up(peers(folder)[system]["tokens_per_s"])


def peak_mib(folder: str, system: str) -> str:
    return f"{peers(folder)[system]['peak_rss_mib']:,.0f} MiB"


P301, P301_BF16 = "engines/peers-gsm8k-301-304", "engines/peers-gsm8k-301-304-bf16"
P_PACKED, P_MAPPED = "engines/peers-gsm8k-301-304-bf16-packed-load", "engines/peers-gsm8k-301-304-mapped-embeddings"
P_INT8, P_INT8_20 = "engines/peers-gsm8k-301-304-int8", "engines/peers-gsm8k-321-340-int8"
P_C16 = ("engines/peers-gsm8k-321-330-c16", "engines/peers-gsm8k-331-340-c16")


def correct_each(folder: str, systems: str) -> str:
    rows = peers(folder)
    found = {f"{rows[s]['correct']}/{rows[s]['problems']}" for s in systems}
    return f"{found.pop()} each" if len(found) == 1 else " / ".join(f"{rows[s]['correct']}/{rows[s]['problems']}" for s in systems)


def agreement_words(folder: str, reference: str, others: str) -> str:
    """"the same answers" where every system of `others` answered as `reference` did."""
    same = all(same_answers(folder, system, reference) for system in others)
    return "the same answers" if same else "other answers"


def engines_row() -> str:
    rows = peers(P301)
    same = agreement_words(P301, "a", "cb")
    return (f"`--method llama-cpp` {tokens_per_s(P301, 'c')} tokens/s, a tuned llama.cpp server {tokens_per_s(P301, 'b')}, "
            f"the in-process default {tokens_per_s(P301, 'a')}: llama.cpp {peer_ratio(P301, 'tokens_per_s', 'c', 'a'):.1f}x the "
            f"in-process tokens/s here, {same} ({correct_each(P301, 'cba')}); peak RSS "
            + " / ".join(gib(rows[s]["peak_rss_mib"]) for s in "cba") + " GiB")


def engines_bf16_row() -> str:
    rows = peers(P301_BF16)
    same = agreement_words(P301_BF16, "b", "ac")
    return (f"the in-process default {tokens_per_s(P301_BF16, 'a')} tokens/s, a tuned llama.cpp server "
            f"{tokens_per_s(P301_BF16, 'b')}, `--method llama-cpp` {tokens_per_s(P301_BF16, 'c')}, `generate()` "
            f"{tokens_per_s(P301_BF16, 'd')}: the default {ratio(peer_ratio(P301_BF16, 'tokens_per_s', 'a', 'b'))} llama.cpp's "
            f"tokens/s at {ratio(peer_ratio(P301_BF16, 'peak_rss_mib', 'a', 'b'), 1)} its peak RSS "
            f"({gib(rows['a']['peak_rss_mib'])} against {gib(rows['b']['peak_rss_mib'])} GiB), {same}")


def against_tuned_server(folder: str, before: str = "") -> str:
    """The in-process default (a) against the tuned llama.cpp server (b) of one stored peers run."""
    return (f"the in-process default {tokens_per_s(folder, 'a')} tokens/s at {peak_mib(folder, 'a')} peak{before}, a "
            f"tuned llama.cpp server {tokens_per_s(folder, 'b')} at {peak_mib(folder, 'b')}: "
            f"{ratio(peer_ratio(folder, 'tokens_per_s', 'a', 'b'))} its tokens/s at "
            f"{ratio(peer_ratio(folder, 'peak_rss_mib', 'a', 'b'))} its memory")


def packed_load_row() -> str:
    return against_tuned_server(P_PACKED, f" (was {peers(P301_BF16)['a']['peak_rss_mib']:,.0f})")


def profile_row() -> str:
    share = {r["part"]: r["share_of_decode_steps"] for r in stored_json("engines/profile-default-bf16/split.json")["rows"]}
    parts = (("linear layers", "linear layers"), ("attention", "attention"),
             ("rest of the model forward", "the rest of the forward"),
             ("step outside the model (drafts, sampling, verify, Python)", "outside the model"))
    return ", ".join(f"{name} {share[part]:.0%}" for part, name in parts)


def mapped_row() -> str:
    return against_tuned_server(P_MAPPED)


def int8_row() -> str:
    fidelity = stored_json("engines/int8-fidelity/fidelity.json")
    right = {s: sum(peers(f)[s]["correct"] for f in (P_INT8, P_INT8_20)) for s in "ea"}
    n = sum(peers(f)["e"]["problems"] for f in (P_INT8, P_INT8_20))
    return (f"teacher-forced agreement with the bfloat16 target's choices {fidelity['int8']['agreement']:.2%} "
            f"(float32: {fidelity['float32']['agreement']:.2%}); 4 problems at once: {tokens_per_s(P_INT8, 'e')} tokens/s at "
            f"{peak_mib(P_INT8, 'e')} (default {tokens_per_s(P_INT8, 'a')} at {peers(P_INT8)['a']['peak_rss_mib']:,.0f}, "
            f"llama.cpp {tokens_per_s(P_INT8, 'b')} at {peers(P_INT8)['b']['peak_rss_mib']:,.0f}: int8 "
            f"{ratio(peer_ratio(P_INT8, 'tokens_per_s', 'e', 'b'))} llama.cpp's tokens/s); 20 problems at 16: "
            f"{tokens_per_s(P_INT8_20, 'e')} against {tokens_per_s(P_INT8_20, 'a')} tokens/s, "
            f"{peers(P_INT8_20)['e']['peak_rss_mib']:,.0f} against {peak_mib(P_INT8_20, 'a')}; "
            f"{right['e']}/{n} against {right['a']}/{n} right")


def c16_row() -> str:
    first, second = P_C16

    def side(folder: str, system: str) -> str:
        row = peers(folder)[system]
        return f"{row['tokens_per_s']:.1f} at {row['peak_rss_mib']:,.0f} MiB, {row['correct']}/{row['problems']}"

    def against(folder: str) -> str:
        return (f"{ratio(peer_ratio(folder, 'tokens_per_s', 'a', 'b'))} at "
                f"{ratio(peer_ratio(folder, 'peak_rss_mib', 'a', 'b'))}")

    return (f"321-330: the in-process default {side(first, 'a').replace(' at', ' tokens/s at', 1)}; llama.cpp "
            f"{side(first, 'b')} ({against(first)}); 331-340: {side(second, 'a')} against {side(second, 'b')} "
            f"({against(second)}); `--int8` on 321-330: {side(first, 'e')}")


FIRST = "engines/first_command"


def time_v(path: str) -> tuple[float, float]:
    """(wall seconds, peak RSS MiB) of a `/usr/bin/time -v` log."""
    text = (RESULTS / path).read_text()
    clock = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): ([\d:.]+)", text).group(1).split(":")
    seconds = sum(float(part) * 60 ** i for i, part in enumerate(reversed(clock)))
    return seconds, int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", text).group(1)) / 1024


def first_command_row() -> str:
    times = dict(zip(*[iter((RESULTS / FIRST / "times.txt").read_text().split()[:6])] * 2))
    sc_seconds, _ = time_v(f"{FIRST}/self_consistency_vs_tree/sc.log")
    bfs_seconds, _ = time_v(f"{FIRST}/self_consistency_vs_tree/bfs.log")
    (run,) = [json.loads(line) for line in (RESULTS / FIRST / "self_consistency_vs_tree/sc-run/runs.jsonl").read_text().splitlines()]
    return (f"on a fresh clone: install {float(times['install']):.0f} s, pulling both models {float(times['pull']):.0f} s",
            f"in {sc_seconds:.0f} s ({run['new_tokens']:,} tokens, {gib(run['peak_rss_mib'], 2)} GiB peak) against "
            f"{bfs_seconds:.0f} s with `--search bfs`")


def same_tokens_both_ways(path: str) -> bool:
    """Whether the API and the CLI generated the same new tokens at every concurrency of a bench_api file."""
    by_level: dict[int, set[int]] = {}
    for row in stored_json(path)["rows"]:
        by_level.setdefault(row["concurrency"], set()).add(row["new_tokens"])
    return all(len(found) == 1 for found in by_level.values())


API_ANSWERS = "bench_api/bench_api_answers_avx512.json"
API_ANSWERS_TEXT = ("the same 4 answers and 7,556 tokens at 1 request at a time (+9.0% time), 3 of 4 answers and "
                    "7,779 tokens against 7,828 at 4 at once (+4.0%)")


def api_answers_cap() -> str:
    args = stored_json(API_ANSWERS)["run_args"]
    return args[args.index("--cot-max-new-tokens") + 1]


def api_answers_null() -> str:
    """Whether every answer of the 64-token-cap runs is null on both sides."""
    answers = [answer for name in ("c1", "c4_c16") for row in stored_json(f"bench_api/bench_api_bf16_{name}.json")["rows"]
               for answer in row["answers"].values()]
    assert answers and all(answer is None for answer in answers)
    return "(every answer there is null: the cap cut each chain before it answered)"


def api_answers_row() -> str:
    """The CLI and the API at 1 and 4 requests at once with chains that answer: answers alike, tokens, time."""
    rows = {(r["way"], r["concurrency"]): r for r in stored_json(API_ANSWERS)["rows"]}
    parts = []
    for level in (1, 4):
        cli, api = rows[("cli", level)], rows[("api", level)]
        assert None not in cli["answers"].values() and None not in api["answers"].values()
        alike = sum(cli["answers"][problem] == answer for problem, answer in api["answers"].items())
        change = api_time_change(API_ANSWERS, level)
        at = "at 1 request at a time" if level == 1 else f"at {level} at once"
        if alike == len(api["answers"]) and cli["new_tokens"] == api["new_tokens"]:
            parts.append(f"the same {alike} answers and {tokens(cli['new_tokens'])} tokens {at} ({change} time)")
        else:
            parts.append(f"{alike} of {len(api['answers'])} answers and {tokens(api['new_tokens'])} tokens against "
                         f"{tokens(cli['new_tokens'])} {at} ({change})")
    return ", ".join(parts)


def api_row() -> tuple[str, str]:
    same = all(same_tokens_both_ways(f"bench_api/bench_api_bf16_{name}.json") for name in ("c1", "c4_c16"))
    levels = [("bench_api/bench_api_bf16_c1.json", 1), ("bench_api/bench_api_bf16_c4_c16.json", 4),
              ("bench_api/bench_api_bf16_c4_c16.json", 16)]
    changes = [api_time_change(path, c) for path, c in levels]
    older = [api_time_change(path.replace("bf16", "same_trees"), c) for path, c in levels]
    return (f"the API's extra time: {changes[0]} at 1 request at a time, {changes[1]} at 4, {changes[2]} at 16; "
            f"the same tokens" if same else "other tokens"), " / ".join(older)


NO_CPU = ("the stored run records cores and the kernel, not the CPU model or its flags, so the machine this "
          "figure was measured on cannot be read from it")

S = {n: f"{n}. " for n in ("1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11", "11b", "11c", "11d", "11e", "11f",
                            "12", "13", "14")}

SPEED_CLAIMS: tuple[Claim, ...] = (
    Claim(RESULTS_README, S["1"], "`batched-lookup` 4.66x / 2.90x serial AR; batched AR 3.58x / 3.70x; SEED (3 draft "
          "processes) 1.78x / 1.68x", expansion_row, ("bench_executors_all_methods/bench_executors.json",)),
    Claim(RESULTS_README, S["2"], "batched AR grows to 5.28x serial AR at n = 6; SEED stays at 1.2-1.9x (n = 2..6)",
          scaling_row, ("bench_executors_scaling/bench_executors.json",)),
    Claim(RESULTS_README, S["3"], "2.59x and 2.18x tokens/s (two invocations), peak RSS 8.1-8.2 GiB; C = 8: 1.91-2.05x",
          concurrency_row, (f"{C12}/float16-c1-4-8-16/summary.json", f"{C12}/float16-c1-16-rerun/summary.json",
                            f"{C12}/float16-c1-8/summary.json")),
    Claim(RESULTS_README, S["4"], "1.14x tokens/s", rounds_row, ("bench_concurrency_rounds_vs_continuous/summary.json",)),
    Claim(RESULTS_README, S["5"], "1.34x; 1.18x at C = 1, 1.11x at C = 4", dtype_row,
          ("bench_c8_prefill_sampling_dtype/float16-vs-bfloat16/summary.json", "bench_packing/summary.json")),
    Claim(RESULTS_README, S["6"], "serial SD 1.09x tokens/s; SEED 0.99x", draft_dtype_row, ("bench_draft_dtype/log.txt",)),
    Claim(RESULTS_README, S["7"], "4.66x faster than no sharing", prefill_row, ("bench_prefill_cache.json",)),
    Claim(RESULTS_README, S["8"], "1.48x / 1.30-1.39x our AR", decoding_row, ("bench_decoding/bench_decoding.json",)),
    Claim(RESULTS_README, S["9"], "lookahead 1.43x AR, Jacobi 1.20x", inner_row, ("bench_inner/bench_inner.json",)),
    Claim(RESULTS_README, S["10"], "3-13x faster, but accuracy falls from 18% to 0-4%", fastcot_row,
          ("bench_inner/bench_inner.json",)),
    Claim(RESULTS_README, S["11"], "`--method llama-cpp` 18.7 tokens/s, a tuned llama.cpp server 15.1, the in-process "
          "default 7.1: llama.cpp 2.6x the in-process tokens/s here, the same answers (2/4 each); peak RSS 4.5 / 2.8 / 7.0 GiB",
          engines_row, (f"{P301}/summary.json",)),
    Claim(RESULTS_README, S["11b"], "the in-process default 48.4 tokens/s, a tuned llama.cpp server 27.8, `--method "
          "llama-cpp` 27.2, `generate()` 6.4: the default 1.74x llama.cpp's tokens/s at 2.4x its peak RSS (6.7 against "
          "2.8 GiB), the same answers", engines_bf16_row, (f"{P301_BF16}/summary.json",)),
    Claim(RESULTS_README, S["11c"], "the in-process default 48.0 tokens/s at 4,306 MiB peak (was 6,835), a tuned llama.cpp "
          "server 26.0 at 2,832 MiB: 1.84x its tokens/s at 1.52x its memory", packed_load_row,
          (f"{P_PACKED}/summary.json", f"{P301_BF16}/summary.json")),
    Claim(RESULTS_README, S["11c"], "linear layers 63%, attention 17%, the rest of the forward 11%, outside the model 9%",
          profile_row, ("engines/profile-default-bf16/split.json",)),
    Claim(RESULTS_README, S["11d"], "the in-process default 51.3 tokens/s at 3,881 MiB peak, a tuned llama.cpp server 24.4 "
          "at 2,831 MiB: 2.11x its tokens/s at 1.37x its memory", mapped_row, (f"{P_MAPPED}/summary.json",)),
    Claim(RESULTS_README, S["11e"], "teacher-forced agreement with the bfloat16 target's choices 98.99% (float32: 99.72%); "
          "4 problems at once: 85.4 tokens/s at 2,781 MiB (default 67.6 at 3,908, llama.cpp 33.0 at 2,837: int8 2.58x "
          "llama.cpp's tokens/s); 20 problems at 16: 122.6 against 104.6 tokens/s, 4,459 against 5,620 MiB; 15/24 against "
          "17/24 right", int8_row, ("engines/int8-fidelity/fidelity.json", f"{P_INT8}/summary.json", f"{P_INT8_20}/summary.json")),
    Claim(RESULTS_README, S["11f"], "321-330: the in-process default 109.2 tokens/s at 4,841 MiB, 8/10; llama.cpp 34.0 at "
          "3,538 MiB, 6/10 (3.21x at 1.37x); 331-340: 92.3 at 4,657 MiB, 8/10 against 33.0 at 3,539 MiB, 9/10 (2.80x at "
          "1.32x); `--int8` on 321-330: 112.0 at 3,385 MiB, 7/10", c16_row, tuple(f"{f}/summary.json" for f in P_C16)),
    Claim(RESULTS_README, S["12"], "on a fresh clone: install 89 s, pulling both models 107 s",
          lambda: first_command_row()[0], (f"{FIRST}/times.txt",)),
    Claim(RESULTS_README, S["12"], "in 96 s (1,322 tokens, 7.14 GiB peak) against 166 s with `--search bfs`",
          lambda: first_command_row()[1], (f"{FIRST}/self_consistency_vs_tree",)),
    Claim(RESULTS_README, S["12"], "native 16-bit arithmetic", not_derivable=NO_CPU, files=(f"{FIRST}/README.md",)),
    Claim(RESULTS_README, S["13"], "peak 3.9 GiB (transformers' own loader: 9.7-10.3 GiB)",
          not_derivable="no stored run: scripts/load_memory.py printed it, and docs/memory.md quotes it; results/ holds no output of it"),
    Claim(RESULTS_README, S["14"], "the API's extra time: +0.0% at 1 request at a time, -2.1% at 4, -2.2% at 16; the same tokens",
          lambda: api_row()[0], ("bench_api/bench_api_bf16_c1.json", "bench_api/bench_api_bf16_c4_c16.json")),
    Claim(RESULTS_README, S["14"], "(every answer there is null: the cap cut each chain before it answered)",
          api_answers_null, ("bench_api/bench_api_bf16_c1.json", "bench_api/bench_api_bf16_c4_c16.json")),
    Claim(RESULTS_README, S["14"], API_ANSWERS_TEXT, api_answers_row, (API_ANSWERS,)),
    Claim(RESULTS_README, S["14"], "chains of up to 512 tokens that answer (the default judged vote, 4 problems",
          lambda: (f"chains of up to {api_answers_cap()} tokens that answer (the default judged "
                   f"vote, {stored_json(API_ANSWERS)['limit']} problems"), (API_ANSWERS,)),
    Claim(RESULTS_README, S["14"], "+12.4% / -3.0% / -0.6%", lambda: api_row()[1],
          ("bench_api/bench_api_same_trees_c1.json", "bench_api/bench_api_same_trees_c4_c16.json")),
)
