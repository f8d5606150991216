"""Problems on Ray actors (one local Ray for the module): the same results as in-process solve_many,
a killed actor's problem retried once elsewhere and then recorded as failed."""

from pathlib import Path

import pytest

ray = pytest.importorskip("ray")

from ray_helpers import SPEC, RaisingGsm8k, SuddenDeathGsm8k, comparable, in_process, problems, work  # noqa: E402

from seed_tot.distributed.ray_pool import plan_actors, solve_on_ray  # noqa: E402
from seed_tot.distributed.work import Failed, Finished  # noqa: E402
from seed_tot.errors import SeedTotError  # noqa: E402
from seed_tot_tasks.gsm8k import Gsm8kTask  # noqa: E402


@pytest.fixture(scope="module")
def local_ray():
    import ray_helpers

    ray.init(num_cpus=2, include_dashboard=False, object_store_memory=100 * 1024**2, logging_level="ERROR")
    ray.cloudpickle.register_pickle_by_value(ray_helpers)  # the actors cannot import tests/
    yield
    ray.shutdown()


def test_actors_give_the_results_of_in_process_solve_many(local_ray):
    task, items = Gsm8kTask(), problems(4)
    expected = in_process(SPEC, task, items, concurrency=2)
    outcomes = list(solve_on_ray(SPEC, work(task), items, actors=2, cpus_per_actor=1, concurrency=2))
    assert all(isinstance(o, Finished) for o in outcomes), [getattr(o, "error", "") for o in outcomes]
    assert sorted(o.problem.id for o in outcomes) == sorted(p.id for p in items)
    for outcome in outcomes:
        result, trace = expected[outcome.problem.id]
        assert outcome.result.answer == result.answer
        assert outcome.result.metrics.new_tokens == result.metrics.new_tokens
        assert comparable(outcome.trace) == comparable(trace)
        assert outcome.attempts == 1
    assert len({o.worker for o in outcomes}) == 2  # both actors searched


def test_a_killed_actor_has_its_problem_retried_elsewhere_then_failed(local_ray, tmp_path):
    items = problems(3)
    lucky, once, always = (p.id for p in items)
    task = SuddenDeathGsm8k(str(tmp_path), once=[once], always=[always])
    expected = in_process(SPEC, Gsm8kTask(), items)
    outcomes = {o.problem.id: o for o in solve_on_ray(SPEC, work(task), items, actors=2, cpus_per_actor=1)}

    assert isinstance(outcomes[lucky], Finished) and outcomes[lucky].attempts == 1
    retried = outcomes[once]
    assert isinstance(retried, Finished) and retried.attempts == 2
    died = (tmp_path / f"{once}.died").read_text().split()
    assert len(died) == 1 and not retried.worker.endswith(f":{died[0]}")  # finished in another process
    assert comparable(retried.trace) == comparable(expected[once][1])

    failed = outcomes[always]
    assert isinstance(failed, Failed) and failed.attempts == 2 and "died" in failed.error
    pids = (tmp_path / f"{always}.died").read_text().split()
    assert len(pids) == 2 and pids[0] != pids[1]  # two attempts, two processes, then given up
    assert [w.rsplit(":", 1)[1] for w in failed.workers] == pids


def test_a_search_error_is_retried_on_another_actor_then_recorded_with_its_message(local_ray):
    items = problems(2)
    good, bad = (p.id for p in items)
    outcomes = {o.problem.id: o for o in solve_on_ray(SPEC, work(RaisingGsm8k(bad=[bad])), items, actors=2,
                                                      cpus_per_actor=1)}
    assert isinstance(outcomes[good], Finished)
    failed = outcomes[bad]
    assert isinstance(failed, Failed) and failed.attempts == 2
    assert failed.error == f"ValueError: cannot build a prompt for {bad}"
    assert len(set(failed.workers)) == 2  # both actors were alive: the retry went to the other one


def test_an_actor_that_cannot_load_its_models_stops_the_run_in_one_sentence(local_ray):
    from dataclasses import replace

    bad = replace(SPEC, target=str(Path("/no/such/model")))
    with pytest.raises(SeedTotError, match="No Ray actor could load its models: .*does not exist"):
        list(solve_on_ray(bad, work(Gsm8kTask()), problems(1), actors=1, cpus_per_actor=1))


def test_plan_actors_fits_the_nodes():
    nodes = [{"Alive": True, "Resources": {"CPU": 4.0}}, {"Alive": True, "Resources": {"CPU": 2.0}},
             {"Alive": False, "Resources": {"CPU": 64.0}}]
    assert plan_actors(nodes, None, None) == (3, 2)  # the smallest node's CPUs each: 2 + 1 actors
    assert plan_actors(nodes, 2, None) == (2, 2)  # 3 CPUs each would not fit the 2-CPU node
    assert plan_actors(nodes, 1, None) == (1, 4)
    assert plan_actors(nodes, None, 1) == (6, 1)
    with pytest.raises(SeedTotError, match="do not fit"):
        plan_actors(nodes, 4, 2)
    with pytest.raises(SeedTotError, match="largest node has 4"):
        plan_actors(nodes, None, 8)


def test_an_address_nobody_listens_on_is_refused_at_once():
    import socket

    from seed_tot.distributed.ray_pool import check_reachable

    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        check_reachable(f"127.0.0.1:{listening.getsockname()[1]}")  # something answers: no error
        free_port = listening.getsockname()[1]
    with pytest.raises(SeedTotError, match="Nothing answers at the Ray address"):
        check_reachable(f"ray://127.0.0.1:{free_port}")
    check_reachable("auto")  # Ray resolves names itself


def test_without_ray_installed_the_cli_says_how_to_get_it(monkeypatch):
    import sys

    from seed_tot.distributed.ray_pool import import_ray

    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` now raises ImportError
    with pytest.raises(SeedTotError, match=r'pip install "seed-tot\[ray\]"'):
        import_ray()


def test_cli_with_an_unreachable_cluster_exits_2_in_one_sentence(tmp_path):
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", "seed_tot", "gsm8k", "--tiny", "--limit", "1", "--out",
                           str(tmp_path / "run"), "--ray", "127.0.0.1:1"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    errors = [line for line in proc.stderr.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1 and "ray start --head" in errors[0] and "Traceback" not in proc.stderr
