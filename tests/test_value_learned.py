"""Value mode "learned": the judge rates states and chains without any evaluator request, every
search takes it, the value-weighted vote, and the CLI's refusals (tiny pair)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from scripted_executor import ScriptedExecutor
from search_helpers import FORMATTER, PROBLEM, TOKENIZER, idea_reply, make_task, tiny_config
from value_heads import tiny_value_head

from seed_tot.errors import ConfigError
from seed_tot.models.fingerprint import weights_fingerprint
from seed_tot.reasoning.prompting import PromptFormatter
from seed_tot.scheduling.factory import make_executor
from seed_tot.search import BFS, BFSConfig, MCTS, MCTSConfig, search_class
from seed_tot.search.answers import select_answer
from seed_tot.task import Problem
from seed_tot.tree import ReasoningTree
from seed_tot.values.features import FEATURE_RULE
from seed_tot.values.head import ValueHead
from seed_tot.values.judge import LearnedJudge
from seed_tot_tasks.gsm8k import Gsm8kTask


class LengthJudge:
    """A stand-in judge: longer states are better (what the searches do with values is under test)."""

    head_id = "length-judge"

    def __init__(self):
        self.calls = 0

    def values(self, task, problem, states, answers=None):
        self.calls += 1
        return [min(1.0, len(state) / 100) for state in states]


@pytest.mark.parametrize("search,config_class", [(BFS, BFSConfig), (MCTS, MCTSConfig)])
def test_searches_rate_with_the_judge_and_send_no_value_request(search, config_class):
    judge = LengthJudge()
    executor = ScriptedExecutor(TOKENIZER, idea_reply)
    config = tiny_config(config_class, value_mode="learned", cot_candidate=False)
    result = search(make_task(), executor, FORMATTER, config, judge=judge).run(PROBLEM)
    assert judge.calls > 0
    assert all(batch.role != "value" for batch in result.batches)
    assert not any(p.startswith("RATE") for prompts in executor.prompts for p in prompts)
    rated = [n for n in result.tree.nodes() if n.value is not None and "rejected" not in n.info]
    assert rated and all(0.0 <= n.value <= 1.0 for n in rated)


def test_learned_mode_without_a_judge_and_a_value_vote_without_learned_mode_are_refused():
    with pytest.raises(ConfigError, match="needs a judge"):
        BFS(make_task(), None, FORMATTER, tiny_config(BFSConfig, value_mode="learned"))
    with pytest.raises(ConfigError, match="value-weighted vote needs every answer rated"):
        BFS(make_task(), None, FORMATTER, tiny_config(BFSConfig, vote_weight="value"))


def _answer_tree(values):
    tree = ReasoningTree()
    tree.add_root("")
    for answer, value in values:
        node = tree.add_child(0, thought=f"The answer is {answer}.", state=f"The answer is {answer}.", kind="answer")
        node.info["cot_sample"] = node.id
        node.value = value
    return tree


def test_value_weighted_vote_sums_values_where_the_plain_vote_counts_nodes():
    task = Gsm8kTask()
    problem = Problem(id="x", question="?", gold="7")
    tree = _answer_tree([("3", 0.1), ("3", 0.2), ("7", 0.9)])
    assert select_answer(task, problem, tree, 1, vote=True, weight="leaf").answer == "3"
    assert select_answer(task, problem, tree, 1, vote=True, weight="value").answer == "7"


def test_self_consistency_with_a_real_judge_rates_every_chain(tiny_pair, tmp_path):
    _, target = tiny_pair
    judge = LearnedJudge.load(target, tiny_value_head(target, tmp_path / "h.safetensors"))
    task = Gsm8kTask()
    problem = task.load()[0]
    config = search_class("self-consistency").config_class(
        **{**tiny_config(BFSConfig).model_dump(exclude={"breadth", "backtrack"}), "value_mode": "learned",
           "vote_weight": "value", "cot_samples": 2})
    search = search_class("self-consistency")(task, make_executor("batched", target), PromptFormatter(target.tokenizer),
                                              config, judge=judge)
    result = search.run(problem)
    chains = [n for n in result.tree.nodes() if n.info.get("cot") or n.info.get("cot_sample")]
    assert len(chains) == 3
    for node in chains:
        if "rejected" in node.info:
            assert node.value is None
        else:
            assert 0.0 < node.value < 1.0 and node.info["judge"] == "tiny-head"
    # the value is the head's probability of the state read alone
    alone = judge.values(task, problem, [chains[0].state], [task.extract_answer(problem, chains[0].state)])[0]
    if chains[0].value is not None:
        assert chains[0].value == pytest.approx(alone, abs=1e-5)


def test_a_state_without_an_answer_is_rated_by_the_step_head(tiny_pair, tmp_path):
    _, target = tiny_pair
    path = tiny_value_head(target, tmp_path / "h.safetensors")
    chains_only = LearnedJudge.load(target, path)
    head = LearnedJudge.load(target, path).head
    hidden = head.weight.shape[0]
    head.steps = ValueHead(layer=2, mean=torch.zeros(hidden), scale=torch.ones(hidden), weight=-head.weight, bias=0.3)
    head.save(tmp_path / "with_steps.safetensors")
    judge = LearnedJudge.load(target, tmp_path / "with_steps.safetensors")
    task = Gsm8kTask()
    problem = task.load()[0]
    states = ["She has 3 apples.", "She has 3 apples.\nSo the answer is 7."]
    values = judge.values(task, problem, states, [None, "7"])
    expected = chains_only.values(task, problem, states, [None, "7"])
    assert values[1] == pytest.approx(expected[1], abs=1e-6)  # the chain head, at the answer
    plain = LearnedJudge(head.steps, target).values(task, problem, states[:1])
    assert values[0] == pytest.approx(plain[0], abs=1e-6) and values[0] != pytest.approx(expected[0], abs=1e-3)


def test_a_head_for_another_target_is_refused(tiny_pair, tmp_path):
    draft, target = tiny_pair
    path = tiny_value_head(draft, tmp_path / "draft_head.safetensors")
    with pytest.raises(ConfigError, match="not on this target 'tiny-target'"):
        LearnedJudge.load(target, path)


def seed_tot(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "seed_tot", *args], capture_output=True, text=True, timeout=300)


@pytest.mark.slow
def test_cli_refusals_come_before_any_model_loads(tmp_path):
    proc = seed_tot("gsm8k", "--tiny", "--ray", "127.0.0.1:1", "--value-mode", "learned", "--out", str(tmp_path / "a"))
    assert proc.returncode != 0 and "reads the target's hidden states in this process" in proc.stderr
    assert "Traceback" not in proc.stderr
    proc = seed_tot("gsm8k", "--tiny", "--value-model", "x.safetensors", "--out", str(tmp_path / "b"))
    assert proc.returncode != 0 and "--value-model applies to --value-mode learned" in proc.stderr


def learned_line_run(tmp_path: Path, *options: str) -> dict:
    """A one-problem line-mode run of the tiny pair with a random head, checked; returns its trace.
    The judge rates only chains that end: a random model ends a chain at a random point, so the chains
    get room (1,536 tokens) and there are four of them beside the greedy one, or else on some CPUs all
    of them are cut off and none is rated."""
    from seed_tot.models.loading import load_model

    head = tiny_value_head(load_model("tiny-target"), tmp_path / "h.safetensors")
    out = tmp_path / "run"
    proc = seed_tot("gsm8k", "--tiny", "--limit", "1", "--value-mode", "learned", "--value-model", str(head),
                    "--vote-weight", "value", "--thought-mode", "line", "--max-new-tokens", "6",
                    "--cot-max-new-tokens", "1536", *options,
                    "--out", str(out))
    assert proc.returncode == 0, proc.stderr[-2000:]
    record = json.loads((out / "results.jsonl").read_text().splitlines()[0])
    trace = json.loads(Path(record["trace_path"]).read_text())
    assert trace["config"]["value_head"]["id"] == "tiny-head"
    assert any(n["value"] is not None for n in trace["nodes"][1:])
    totals = json.loads((out / "runs.jsonl").read_text().splitlines()[-1])
    assert totals["judge"]["tokens_read"] > 0 and "judge:" in proc.stdout
    return trace


@pytest.mark.slow
def test_cli_run_with_a_learned_judge_records_the_head_and_the_values(tmp_path):
    trace = learned_line_run(tmp_path, "--cot-samples", "4", "--depth", "3")
    assert trace["config"]["search"]["vote_weight"] == "value"
    assert trace["config"]["search"]["thought_mode"] == "line"
    other = tmp_path / "other.safetensors"
    draft_head = ValueHead(layer=1, mean=torch.zeros(64), scale=torch.ones(64), weight=torch.zeros(64), bias=0.0,
                           meta={"target": "someone-else", "target_fingerprint": "0" * 16})
    draft_head.save(other)
    proc = seed_tot("gsm8k", "--tiny", "--limit", "1", "--value-mode", "learned", "--value-model", str(other),
                    "--out", str(tmp_path / "c"))
    assert proc.returncode != 0 and "was trained on 'someone-else'" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.slow
def test_train_value_refuses_test_problems_and_keeps_rollouts_when_it_cannot_fit(tmp_path):
    test_file = Path(Gsm8kTask.default_data_path)
    proc = seed_tot("train", "value", "--target", "tiny", "--data", str(test_file), "--problems", "2",
                    "--out", str(tmp_path / "a"))
    assert proc.returncode != 0 and "test problems" in proc.stderr and "Traceback" not in proc.stderr
    out = tmp_path / "b"
    proc = seed_tot("train", "value", "--target", "tiny", "--problems", "2", "--samples", "1", "--out", str(out))
    # random weights never reach the gold: one clear sentence, the rollouts and features kept
    assert proc.returncode != 0 and "a judge learns from both" in proc.stderr
    rows = [json.loads(line) for line in (out / "train-pool" / "cot_samples.jsonl").read_text().splitlines()]
    assert sorted(r["problem_id"] for r in rows) == ["gsm8k-train-1", "gsm8k-train-2"]  # in finishing order
    assert rows[0]["settings"]["target"] == "tiny" and len(rows[0]["samples"]) == 1
    assert list((out / "features-float32").glob("shard-*.pt"))


@pytest.mark.slow
def test_train_value_samples_rollouts_with_llama_cpp_on_the_same_weights(tmp_path):
    pool = tmp_path / "pool"
    proc = seed_tot("train", "value", "--target", "tiny", "--problems", "2", "--samples", "1", "--pool", str(pool),
                    "--collect-only", "--rollout-engine", "llama-cpp", "--concurrency", "2")
    assert proc.returncode == 0, proc.stderr
    rows = [json.loads(line) for line in (pool / "cot_samples.jsonl").read_text().splitlines()]
    assert sorted(r["problem_id"] for r in rows) == ["gsm8k-train-1", "gsm8k-train-2"]
    settings = rows[0]["settings"]
    assert settings["executor"] == "llama-cpp" and settings["dtype"].endswith(".gguf")
    assert settings["engine"]["slots"] == 2 * 2 and settings["engine"]["threads"] >= 1
    assert all(len(r["samples"]) == 1 for r in rows)


@pytest.mark.slow
def test_a_test_pool_can_be_sampled_by_llama_cpp_and_records_the_engine(tmp_path):
    script = Path(__file__).resolve().parent.parent / "scripts" / "add_cot_samples.py"
    pool = tmp_path / "pool"
    proc = subprocess.run([sys.executable, str(script), str(pool), "--task", "gsm8k", "--limit", "1", "--samples", "1",
                           "--per-call", "1", "--target", "tiny", "--method", "llama-cpp"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    (row,) = [json.loads(line) for line in (pool / "cot_samples.jsonl").read_text().splitlines()]
    assert row["problem_id"] == "gsm8k-1" and row["greedy"] and len(row["samples"]) == 1
    settings = row["settings"]
    assert settings["executor"] == "llama-cpp" and settings["dtype"].endswith(".gguf")
    assert settings["engine"]["slots"] == 1 * 2
    refused = subprocess.run([sys.executable, str(script), str(pool), "--samples", "1", "--method", "llama-cpp"],
                             capture_output=True, text=True, timeout=120)
    assert refused.returncode != 0 and "pools only" in refused.stderr


@pytest.mark.slow
def test_a_learned_judge_rates_the_states_of_a_run_that_decodes_on_llama_cpp(tmp_path):
    trace = learned_line_run(tmp_path, "--method", "llama-cpp", "--cot-samples", "0", "--depth", "2")
    assert trace["config"]["engine"]["engine"] == "llama.cpp"
