"""Ray across machines, simulated by a two-node ray.cluster_utils.Cluster on loopback (one per
module): actors on both nodes give in-process results; the CLI joins the cluster by its address,
resumes, and keeps every finished problem on Ctrl-C without leaving an actor behind."""

import json
import signal
import subprocess
import sys
import time

import pytest

ray = pytest.importorskip("ray")

from signal_helpers import sigint_as_at_a_terminal  # noqa: E402
from ray_helpers import SPEC, NodeRecordingGsm8k, comparable, in_process, problems, work  # noqa: E402

from seed_tot.distributed.ray_pool import solve_on_ray  # noqa: E402
from seed_tot.distributed.work import Finished  # noqa: E402
from seed_tot.observe.trace import load_trace  # noqa: E402
from seed_tot_tasks.gsm8k import Gsm8kTask  # noqa: E402

STORE = 100 * 1024**2
CLI = ["--tiny", "--dtype", "float32", "--method", "batched", "--depth", "2", "--thoughts", "2", "--max-new-tokens", "8",
       "--value-max-new-tokens", "6", "--value-samples", "1", "--search", "bfs", "--no-cot", "--threads", "1"]


@pytest.fixture(scope="module")
def cluster():
    import ray_helpers
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={
        "num_cpus": 1, "include_dashboard": False, "object_store_memory": STORE})
    cluster.add_node(num_cpus=1, object_store_memory=STORE)
    ray.init(address=cluster.address, logging_level="ERROR")
    cluster.wait_for_nodes()
    ray.cloudpickle.register_pickle_by_value(ray_helpers)
    yield cluster
    ray.shutdown()
    cluster.shutdown()


def seed_tot(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "seed_tot", *args], capture_output=True, text=True, timeout=600)


def test_actors_on_two_nodes_give_in_process_results(cluster, tmp_path):
    items = problems(2)
    outcomes = list(solve_on_ray(SPEC, work(NodeRecordingGsm8k(str(tmp_path))), items))  # defaults: 1 actor per node
    expected = in_process(SPEC, Gsm8kTask(), items)
    assert all(isinstance(o, Finished) for o in outcomes)
    for outcome in outcomes:
        assert comparable(outcome.trace) == comparable(expected[outcome.problem.id][1])
    nodes = {(tmp_path / f"{p.id}.node").read_text() for p in items}
    assert nodes == {n["NodeID"] for n in ray.nodes() if n["Alive"]}  # one problem on each machine


def test_cli_joins_the_cluster_equals_the_in_process_cli_and_resumes(cluster, tmp_path):
    here, there = tmp_path / "here", tmp_path / "there"
    local = seed_tot("gsm8k", *CLI, "--limit", "2", "--out", str(here))
    assert local.returncode == 0, local.stderr[-2000:]
    first = seed_tot("gsm8k", *CLI, "--limit", "1", "--out", str(there), "--ray", cluster.address)
    assert first.returncode == 0, first.stderr[-2000:]
    resumed = seed_tot("gsm8k", *CLI, "--limit", "2", "--out", str(there), "--ray", cluster.address, "--resume")
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert "1 of 2 problems already done" in resumed.stdout and "ray actor" in resumed.stdout

    records = [json.loads(line) for line in (there / "results.jsonl").read_text().splitlines()]
    assert [r["problem_id"] for r in records] == ["gsm8k-1", "gsm8k-2"]
    expected = {json.loads(line)["problem_id"]: json.loads(line) for line in (here / "results.jsonl").read_text().splitlines()}
    for record in records:
        twin = expected[record["problem_id"]]
        assert (record["answer"], record["new_tokens"], record["extra"]) == (twin["answer"], twin["new_tokens"], twin["extra"])
        assert comparable(load_trace(record["trace_path"])) == comparable(load_trace(twin["trace_path"]))
    run = json.loads((there / "runs.jsonl").read_text().splitlines()[-1])
    assert run["problems"] == 1 and run["ray"]["actors"] == 2 and run["ray"]["failed_problems"] == 0


def test_ctrl_c_keeps_every_finished_problem_and_ends_the_actors(cluster, tmp_path):
    out = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, "-m", "seed_tot", "gsm8k", *CLI, "--limit", "12", "--out", str(out),
                             "--ray", cluster.address], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=sigint_as_at_a_terminal)
    for line in proc.stdout:
        if line.startswith("[gsm8k-"):
            break
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr[-2000:]
    assert "every finished problem is saved" in stderr
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert 1 <= len(records) < 12
    assert all(load_trace(r["trace_path"]).problem_id == r["problem_id"] for r in records)
    deadline = time.monotonic() + 60
    while ray.available_resources().get("CPU", 0) < 2 and time.monotonic() < deadline:
        time.sleep(0.5)
    assert ray.available_resources().get("CPU", 0) == 2  # no actor of the interrupted run is left
