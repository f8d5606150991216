"""--method auto chosen by measurement (seed_tot/calibration): the candidates, the choice, the cached
record per machine and target, and a real probe of the in-process path and of llama.cpp on the tiny model."""

import json

import pytest
from click.testing import CliRunner

from seed_tot.calibration import choice
from seed_tot.calibration.machine import identity_key, machine_identity, read_bandwidth_gb_s
from seed_tot.calibration.probe import RunPath, Timing, time_engine, time_in_process
from seed_tot.cli.run_config import RunConfig, resolve_config
from seed_tot.errors import ModelNotFoundError


@pytest.fixture(autouse=True)
def no_roofline(monkeypatch):
    """The pulled models' sizes (where a developer has them) leave the fake timings' choices alone."""
    monkeypatch.setattr(choice, "speed_bound", lambda *args: None)
    monkeypatch.setattr(choice, "compute_bound", lambda *args: None)


@pytest.fixture(autouse=True)
def calibration_dir(tmp_path, monkeypatch):
    monkeypatch.setenv(choice.CALIBRATION_ENV, str(tmp_path / "calibration"))
    return tmp_path / "calibration"


def fake_timer(speeds: dict[str, float]):
    """A timer that reports `speeds[label]` tokens/s (a missing label cannot run here)."""
    calls = []

    def timer(target, path, width):
        calls.append((target, path.label, width))
        if path.label not in speeds:
            raise ModelNotFoundError(f"{path.label} is not here: run `seed-tot models pull`.")
        return Timing(path, tokens=width * 8, seconds=width * 8 / speeds[path.label], load_seconds=0.5)

    timer.calls = calls
    return timer


def printed(*args):
    from seed_tot.cli import main

    result = CliRunner().invoke(main, [*args, "--print-config"])
    assert result.exit_code == 0, (result.exception, result.output[-2000:])
    return RunConfig(**json.loads(result.stdout))


def test_the_fastest_measured_path_is_chosen_and_cached():
    timer = fake_timer({"batched-lookup float32": 9.0, "batched-lookup bfloat16": 4.0, "llama-cpp": 20.0})
    record = choice.calibrate("default-target", 5, timer=timer)
    assert record.width == 8 and record.chosen["method"] == "llama-cpp" and record.chosen["dtype"] is None
    assert [c[1] for c in timer.calls][:2] == ["llama-cpp", "batched-lookup bfloat16"]
    assert timer.calls[-1][1] == "batched-lookup float32"
    assert choice.cached_calibration("default-target", 8) == record
    assert choice.cached_calibration("default-target", 16) is None  # another width is measured apart
    assert "llama-cpp (20.0 tokens/s at 8 rows" in record.line() and "batched-lookup float32 9.0" in record.line()


def test_a_path_whose_roofline_is_below_a_measured_speed_is_not_timed():
    timer = fake_timer({"batched-lookup float32": 9.0, "batched-lookup bfloat16": 40.0, "llama-cpp": 20.0})
    bounds = {"batched-lookup bfloat16": 60.0, "batched-lookup float32": 30.0}  # at the measured bandwidth
    record = choice.calibrate("default-target", 8, timer=timer, bound=lambda t, path, w, bw: bounds.get(path.label))
    assert "batched-lookup float32" not in [c[1] for c in timer.calls]
    [skipped] = [t for t in record.timings if t["label"] == "batched-lookup float32"]
    assert "at most 30.0 tokens/s at 8 rows, well below batched-lookup bfloat16's measured 40.0" in skipped["skipped"]
    assert record.chosen["label"] == "batched-lookup bfloat16" and "float32" not in record.line()
    bounds["batched-lookup float32"] = 35.0  # within the margin of the best so far: timed
    timer = fake_timer({"batched-lookup bfloat16": 40.0, "batched-lookup float32": 9.0})
    choice.calibrate("default-target", 8, timer=timer, bound=lambda t, path, w, bw: bounds.get(path.label))
    assert timer.calls[-1][1] == "batched-lookup float32"


def test_a_path_whose_products_are_too_slow_here_is_not_timed():
    """On a CPU that emulates 16-bit products (AVX2 only), bfloat16's arithmetic alone caps it below
    llama.cpp's measured speed, whatever its bandwidth would allow: it is not loaded."""
    timer = fake_timer({"llama-cpp": 15.6, "batched-lookup bfloat16": 5.8, "batched-lookup float32": 13.5})
    compute = {"batched-lookup bfloat16": 6.4, "batched-lookup float32": 21.0}
    record = choice.calibrate("default-target", 8, timer=timer, bound=lambda t, path, w, bw: 40.0 if path.dtype else None,
                              compute=lambda t, path, w: compute.get(path.label))
    assert [c[1] for c in timer.calls] == ["llama-cpp", "batched-lookup float32"]
    [skipped] = [t for t in record.timings if "skipped" in t]
    assert skipped["label"] == "batched-lookup bfloat16"
    assert "its products here allow at most 6.4 tokens/s at 8 rows, well below llama-cpp's measured 15.6" in skipped["skipped"]


def test_the_compute_bound_is_the_timed_product_rate_over_two_operations_a_weight(monkeypatch):
    from seed_tot.calibration import roofline

    rate = roofline.product_rate("float32", 4)
    assert rate > 1e8  # a real product: any CPU this runs on does more than 0.1 GFLOP/s
    monkeypatch.setattr(roofline, "target_weights", lambda target: 10**9)
    monkeypatch.setattr(roofline, "product_rate", lambda dtype, rows: 60e9)
    assert roofline.compute_bound("default-target", RunPath("batched-lookup", "float32"), 8) == pytest.approx(30.0)
    assert roofline.compute_bound("default-target", RunPath("llama-cpp"), 8) is None  # its own kernels
    assert roofline.compute_bound("default-target", RunPath("batched-lookup", "float32", int8=True), 8) is None


def test_a_low_bandwidth_reading_never_bounds_a_path_below_a_speed_already_measured(monkeypatch):
    """bfloat16 measured 45 tokens/s where the bandwidth read implies at most 40: the bandwidth it
    must have had is used instead, so float16 (the same bytes) is timed, and float32 (twice) is not."""
    monkeypatch.setattr(choice, "read_bandwidth_gb_s", lambda: 13.0)
    monkeypatch.setattr(choice, "candidate_paths", lambda target, allow_int8: [
        RunPath("batched-lookup", "bfloat16"), RunPath("batched-lookup", "float16"), RunPath("batched-lookup", "float32")])
    step_gb = {"bfloat16": 2.6, "float16": 2.6, "float32": 5.2}
    timer = fake_timer({"batched-lookup bfloat16": 45.0, "batched-lookup float16": 22.0, "batched-lookup float32": 20.0})
    record = choice.calibrate("default-target", 8, timer=timer, bound=lambda t, path, w, bw: w * bw / step_gb[path.dtype])
    assert [c[1] for c in timer.calls] == ["batched-lookup bfloat16", "batched-lookup float16"]
    [skipped] = [t for t in record.timings if "skipped" in t]
    assert skipped["label"] == "batched-lookup float32" and "read at 14.6 GB/s allow at most 22.5" in skipped["skipped"]


def test_the_roofline_counts_the_weights_a_step_reads(tmp_path):
    import torch
    from safetensors.torch import save_file

    from seed_tot.calibration.roofline import speed_bound, weights_read_every_step

    save_file({"model.embed_tokens.weight": torch.zeros(100, 8), "model.layers.0.mlp.up_proj.weight": torch.zeros(16, 8),
               "lm_head.weight": torch.zeros(100, 8)}, str(tmp_path / "model.safetensors"))
    assert weights_read_every_step(tmp_path) == 16 * 8
    assert speed_bound("tiny-target", RunPath("batched-lookup", "float32"), 8, 25.0) is None  # nothing to read
    assert speed_bound("default-target", RunPath("llama-cpp"), 8, 25.0) is None  # an engine's own file


def other_work_of(share):
    class FakeOtherWork:
        def share(self, cores):
            return share
    return FakeOtherWork


def test_a_measurement_made_while_other_work_held_the_cores_says_so(monkeypatch):
    monkeypatch.setattr(choice, "OtherWork", other_work_of(0.6))
    busy = choice.calibrate("default-target", 8, timer=fake_timer({"batched-lookup float32": 9.0}))
    assert busy.was_busy and "held 60% of the cores" in busy.line() and "when the machine is quiet" in busy.line()
    monkeypatch.setattr(choice, "OtherWork", other_work_of(0.02))
    monkeypatch.setattr(choice, "load_average", lambda: [9.0, 9.0, 9.0])  # measured share wins over the lagging load
    quiet = choice.calibrate("default-target", 8, timer=fake_timer({"batched-lookup float32": 9.0}))
    assert not quiet.was_busy and "quiet" not in quiet.line()


def test_where_other_work_cannot_be_read_the_load_average_decides(monkeypatch):
    monkeypatch.setattr(choice, "OtherWork", other_work_of(None))
    monkeypatch.setattr(choice, "load_average", lambda: [9.0, 9.0, 9.0])
    assert choice.calibrate("default-target", 8, timer=fake_timer({"batched-lookup float32": 9.0})).was_busy


def test_other_work_is_read_from_the_machine_s_counters():
    from seed_tot.machine_facts import OtherWork, busy_cpu_seconds

    meter = OtherWork()
    sum(i * i for i in range(200_000))  # this process's own work is not counted as other work
    share = meter.share(cores=1)
    assert busy_cpu_seconds() is None or (share is not None and 0.0 <= share)


class SlowedExecutor:
    """Costs `prefill` + `step` x new tokens seconds of a fake clock a call, plus `slowed[i]` on call i
    (other work on the machine), and returns rows of that many tokens."""

    def __init__(self, clock, prefill, step, slowed):
        self.clock, self.prefill, self.step, self.slowed, self.calls = clock, prefill, step, slowed, 0

    def run(self, requests):
        from types import SimpleNamespace

        new = requests[0].config.max_new_tokens
        self.clock[0] += self.prefill + self.step * new + self.slowed.get(self.calls, 0.0)
        self.calls += 1
        return [SimpleNamespace(token_ids=[0] * new) for _ in requests]


def test_the_probe_times_steps_by_the_fastest_of_each_call_where_other_work_ran(monkeypatch):
    from seed_tot.calibration import probe

    clock, shares = [0.0], iter([0.5, 0.5, 0.0])  # other work during the first two rounds
    monkeypatch.setattr(probe.time, "perf_counter", lambda: clock[0])
    monkeypatch.setattr(probe, "OtherWork", lambda: type("W", (), {"share": lambda self, cores: next(shares)})())
    # call 1 (round 1's short call) slowed by 3 s: a per-round difference would keep round 1's
    # too-small difference and report steps ~30x faster than they are
    executor = SlowedExecutor(clock, prefill=1.0, step=0.1, slowed={1: 3.0, 4: 2.0})
    tokens, seconds, rounds = probe.time_executor(executor, [1, 2, 3], width=4, new_tokens=8)
    assert rounds == 3 and tokens == 4 * 8 and seconds == pytest.approx(0.8)


def test_one_round_is_enough_where_nothing_else_ran(monkeypatch):
    from seed_tot.calibration import probe

    clock = [0.0]
    monkeypatch.setattr(probe.time, "perf_counter", lambda: clock[0])
    monkeypatch.setattr(probe, "OtherWork", lambda: type("W", (), {"share": lambda self, cores: 0.0})())
    executor = SlowedExecutor(clock, prefill=1.0, step=0.1, slowed={})
    assert probe.time_executor(executor, [1], width=2, new_tokens=8)[1:] == (pytest.approx(0.8), 1)


def test_an_in_process_dtype_wins_where_it_is_faster():
    timer = fake_timer({"batched-lookup float32": 9.0, "batched-lookup bfloat16": 31.0, "llama-cpp": 20.0})
    record = choice.calibrate("default-target", 16, timer=timer)
    assert record.chosen == {"method": "batched-lookup", "dtype": "bfloat16", "int8": False,
                             "label": "batched-lookup bfloat16"}


def test_a_path_that_cannot_start_is_recorded_not_chosen_and_none_raises_its_own_sentence():
    record = choice.calibrate("default-target", 4, timer=fake_timer({"batched-lookup float32": 3.0}))
    errors = {t["label"]: t["error"] for t in record.timings}
    assert record.chosen["label"] == "batched-lookup float32" and errors["batched-lookup float32"] is None
    assert "models pull" in errors["batched-lookup bfloat16"]
    with pytest.raises(ModelNotFoundError, match="models pull"):
        choice.calibrate("default-target", 4, timer=fake_timer({}))


def test_a_record_from_another_machine_is_measured_again(calibration_dir):
    choice.calibrate("default-target", 8, timer=fake_timer({"batched-lookup float32": 9.0, "llama-cpp": 20.0}))
    [path] = calibration_dir.glob("*.json")
    record = json.loads(path.read_text())
    record["machine"]["cores"] += 1
    path.write_text(json.dumps(record))
    assert choice.cached_calibration("default-target", 8) is None


def test_int8_is_a_candidate_only_where_allowed():
    from seed_tot.runtime.int8_linear import int8_works

    plain = choice.candidate_paths("default-target", allow_int8=False)
    assert not any(p.int8 for p in plain)
    assert {"batched-lookup float32", "batched-lookup bfloat16"} <= {p.label for p in plain}
    allowed = choice.candidate_paths("default-target", allow_int8=True)
    assert any(p.int8 for p in allowed) == int8_works()
    assert not any(p.method == "llama-cpp" for p in choice.candidate_paths("/models/saved-dir", False))


def test_auto_follows_the_cached_measurement_and_takes_its_dtype():
    import torch

    if torch.cuda.is_available():
        pytest.skip("auto stays in process on a GPU")
    choice.calibrate("default-target", 8, timer=fake_timer({"batched-lookup float32": 9.0, "batched-lookup bfloat16": 12.0}))
    config = printed("gsm8k", "--limit", "1")
    assert (config.method, config.dtype) == ("batched-lookup", "bfloat16")
    assert config.auto_choice["by"] == "measurement" and config.auto_choice["chosen"]["dtype"] == "bfloat16"
    assert "auto_choice" in config.recorded()  # every trace records how auto was resolved
    forced = printed("gsm8k", "--limit", "1", "--dtype", "float32")
    assert (forced.method, forced.dtype) == ("batched-lookup", "float32")  # --dtype still forces a dtype
    assert printed("gsm8k", "--limit", "1", "--method", "ar").auto_choice is None  # --method forces a path
    choice.calibrate("default-target", 8, timer=fake_timer({"batched-lookup float32": 9.0, "llama-cpp": 20.0}))
    assert printed("gsm8k", "--limit", "1").method == "llama-cpp"


def test_print_config_never_times_a_path_and_the_tiny_models_keep_the_rule(calibration_dir):
    assert printed("gsm8k", "--limit", "1").auto_choice is None  # nothing cached: the CPU-flags rule
    assert not calibration_dir.exists()
    tiny = printed("gsm8k", "--tiny")
    assert (tiny.method, tiny.auto_choice) == ("batched-lookup", None)


def test_the_probe_width_follows_the_problems_at_once_and_their_chains():
    from seed_tot.cli.run_config import probe_width

    config = printed("gsm8k", "--tiny", "--limit", "1")
    assert probe_width(config) == 5 and choice.width_bucket(5) == 8
    assert choice.width_bucket(probe_width(printed("gsm8k", "--tiny"))) == 16


def test_the_machine_identity_names_the_cpu_and_reads_bandwidth():
    identity = machine_identity()
    assert identity["cores"] >= 1 and identity["cpu_model"] and identity["torch"]
    assert identity_key(identity) == identity_key(dict(identity))
    assert read_bandwidth_gb_s(megabytes=32, repeats=1) > 0


def test_a_real_probe_of_the_in_process_path_on_the_tiny_model():
    timing = time_in_process("tiny-target", RunPath("batched-lookup", "float32"), width=4)
    assert timing.tokens == 4 * 8 and timing.seconds > 0 and timing.tokens_per_second > 0  # the 8 decode steps' tokens


def test_a_real_probe_of_llama_cpp_on_the_tiny_model():
    pytest.importorskip("xllamacpp")
    timing = time_engine("tiny-target", RunPath("llama-cpp"), width=4)
    assert timing.tokens == 4 * 8 and timing.tokens_per_second > 0


def test_the_calibrate_command_prints_its_choice(calibration_dir, monkeypatch):
    from seed_tot.cli import main

    monkeypatch.setattr(choice, "time_path", fake_timer({"batched-lookup float32": 9.0, "llama-cpp": 20.0}))
    result = CliRunner().invoke(main, ["calibrate", "--width", "8"])
    assert result.exit_code == 0, result.output
    assert "auto: llama-cpp (20.0 tokens/s at 8 rows" in result.output and len(list(calibration_dir.glob("*.json"))) == 1
