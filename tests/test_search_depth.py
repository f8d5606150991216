"""The search depth has one home, the search config: the Python API and the CLI given the same depth
build the same tree (GSM8K asks its closing question at the search's last step, whoever set it)."""

import json

from click.testing import CliRunner

from seed_tot.api import solve, to_trace
from seed_tot.cli import main
from seed_tot.models import load_model
from seed_tot.observe.trace import load_trace
from seed_tot.scheduling.factory import make_executor
from seed_tot_tasks import get_task
from seed_tot_tasks.gsm8k import Gsm8kTask

CLI_RUN = ["gsm8k", "--tiny", "--device", "cpu", "--dtype", "float32", "--method", "batched", "--search", "bfs",
           "--depth", "6", "--thoughts", "2", "--max-new-tokens", "8", "--value-max-new-tokens", "4",
           "--value-samples", "1", "--no-cot", "--limit", "1"]


def tree_of(trace) -> list[tuple]:
    return [(node.id, node.parent, node.depth, node.kind, node.thought, node.state) for node in trace.nodes]


def test_solve_with_depth_6_builds_the_tree_of_the_cli_with_depth_6(tmp_path):
    result = CliRunner().invoke(main, [*CLI_RUN, "--out", str(tmp_path / "run")])
    assert result.exit_code == 0, result.output
    record = json.loads((tmp_path / "run" / "results.jsonl").read_text().splitlines()[0])
    cli_trace = load_trace(record["trace_path"])
    settings = {name: value for name, value in cli_trace.config["search"].items() if name != "depth"}

    task = get_task("gsm8k")
    problem = next(p for p in task.load() if p.id == cli_trace.problem_id)
    target = load_model("tiny-target", dtype="float32", device="cpu")
    executor = make_executor("batched", target)
    api_result = solve(task, problem, executor, target, search="bfs", depth=6, **settings)

    assert max(node.depth for node in api_result.tree.nodes()) == 6
    assert tree_of(to_trace(api_result, task, executor)) == tree_of(cli_trace)


def test_gsm8k_asks_its_closing_question_at_the_depth_it_is_given():
    task, problem = Gsm8kTask(), Gsm8kTask().load()[0]
    closing = "Now answer the original question"
    assert [closing in task.thought_prompt(problem, "", step, 6) for step in range(6)] == [False] * 5 + [True]
    assert closing in task.thought_prompt(problem, "", 3, task.default_depth)
