"""What every system of `seed-tot bench --peers` (seed_tot/cli/bench_peers.py) shares: the run
settings and problems the CLI itself would take, the chains each problem decodes, and the records
of a system's answers."""

from __future__ import annotations

import json
from pathlib import Path


# ---------------------------------------------------------------- the run settings every system shares

def cli_args(spec: dict, limit: int | None = None) -> list[str]:
    """The `seed-tot gsm8k` arguments that pick the problems (the first `limit` of them, default
    all), models and shared knobs."""
    args = ["--data", spec["data"], "--start", str(spec["start"]), "--limit", str(limit or spec["limit"]),
            "--concurrency", str(spec["concurrency"]), "--threads", str(spec["threads"]),
            "--vote-weight", "leaf"]  # the plain vote everywhere: the learned judge is no engine's, so a and b do the same work
    return args + (["--tiny"] if spec["tiny"] else [])


def plan_for(spec: dict, method: str, out: Path):
    """The run `seed-tot gsm8k <cli_args> --method METHOD --out OUT` would make (task, search, its
    config, the problems), parsed by the CLI's own command so the defaults are the CLI's."""
    from seed_tot.cli.run_config import RunConfig
    from seed_tot.cli.task_run import plan_run
    from seed_tot.cli.tasks import gsm8k

    context = gsm8k.make_context("gsm8k", [*cli_args(spec), "--method", method, "--out", str(out)])
    params = {k: v for k, v in context.params.items() if k != "print_config"}
    return plan_run("gsm8k", RunConfig(**params))


def chain_settings(search_config) -> dict:
    """What every system decodes per problem: the chains' count, settings and seeds."""
    from seed_tot.search.chains import cot_requests

    requests = cot_requests([0], search_config, "PROBLEM")
    return {
        "search": "self-consistency",
        "chains": len(requests),
        "per_chain": [request.config.model_dump(mode="json") for request in requests],
        "run_seed": search_config.seed,
        "seed_rule": "request_seed(run seed, problem id, 0, 'cot', chain index) (seed_tot/reasoning/request_seeds.py)",
        "vote": search_config.vote,
        "vote_weight": search_config.vote_weight,
    }


def default_data() -> Path:
    from seed_tot_tasks import get_task

    return Path(get_task("gsm8k").default_data_path)


def target_name(spec: dict) -> str:
    return "tiny-target" if spec["tiny"] else "default-target"


# ---------------------------------------------------------------- records shared by the workers

def problem_record(result, since_start: float) -> dict:
    selection = result.selection
    return {
        "problem_id": result.problem.id, "answer": result.answer, "gold": str(result.problem.gold),
        "correct": bool(result.correct), "new_tokens": result.metrics.new_tokens,
        "votes": selection.votes if selection else None, "cot_answer": selection.cot_answer if selection else None,
        "finished_after_s": round(since_start, 2),
    }


def totals(records: list[dict], run_wall: float, load_s: float) -> dict:
    tokens = sum(r["new_tokens"] for r in records)
    return {"per_problem": [{k: r[k] for k in ("problem_id", "answer", "gold", "correct", "new_tokens")} for r in records],
            "problems": len(records), "correct": sum(r["correct"] for r in records), "new_tokens": tokens,
            "run_wall_s": round(run_wall, 2), "load_s": round(load_s, 2),
            "tokens_per_s": round(tokens / run_wall, 2) if run_wall > 0 else None,
            **answer_pace(len(records), run_wall, [r.get("finished_after_s") for r in records])}


def answer_pace(problems: int, run_wall: float | None, finished_after: list[float | None]) -> dict:
    """Problems answered per hour over the run, and seconds from the first request to the first answer."""
    known = [t for t in finished_after if t is not None]
    return {"problems_per_hour": round(problems / run_wall * 3600, 1) if run_wall else None,
            "first_answer_s": min(known) if known else None}


def write_jsonl(path: Path, rows: list[dict]) -> None:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
