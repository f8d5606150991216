"""What --method auto picks: llama.cpp for a GGUF target on a CPU without native 16-bit
arithmetic (no GPU), the in-process batched-lookup executor everywhere else."""

import pytest
import torch

from seed_tot.scheduling.methods import IN_PROCESS_DEFAULT_METHOD, resolve_method

pytest.importorskip("xllamacpp")
no_gpu = pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU default")


@no_gpu
@pytest.mark.parametrize("target", ["default-target", "qwen2.5-coder-1.5b-instruct", "/models/my.Q4_K_M.gguf"])
def test_gguf_targets_on_a_float32_only_cpu_run_on_llama_cpp(target, monkeypatch):
    import seed_tot.models.loading as loading

    monkeypatch.setattr(loading, "cpu_supports_bf16", lambda: False)
    monkeypatch.setattr(loading, "cpu_supports_fp16", lambda: False)
    assert resolve_method("auto", target, tiny=False, device="auto") == "llama-cpp"
    assert resolve_method("auto", target, tiny=False, device="cpu") == "llama-cpp"


@no_gpu
def test_a_cpu_with_native_16_bit_arithmetic_runs_in_process(monkeypatch):
    import seed_tot.models.loading as loading

    monkeypatch.setattr(loading, "cpu_supports_bf16", lambda: True)
    assert resolve_method("auto", "default-target", tiny=False, device="cpu") == IN_PROCESS_DEFAULT_METHOD


@pytest.mark.parametrize(
    "target,tiny,device",
    [
        ("default-target", True, "auto"),  # the tiny pair: the in-process research path
        ("Qwen/Qwen2.5-Coder-1.5B-Instruct", False, "auto"),  # a hub id: transformers weights
        ("/models/saved-dir", False, "auto"),  # a transformers directory
        ("default-target", False, "cuda"),  # a GPU: the torch executors
    ],
)
def test_everything_else_stays_in_process(target, tiny, device):
    assert resolve_method("auto", target, tiny, device) == IN_PROCESS_DEFAULT_METHOD


def test_the_embedded_server_uses_every_core_it_may_run_on_whatever_the_load(monkeypatch):
    import os

    from seed_tot.engines.embedded import default_threads

    monkeypatch.setattr(os, "getloadavg", lambda: (99.0, 99.0, 99.0))  # a busy-looking machine changes nothing
    assert default_threads() == len(os.sched_getaffinity(0))


@no_gpu
def test_rollouts_follow_the_same_choice_when_only_sampling(monkeypatch):
    import seed_tot.models.loading as loading
    from seed_tot.training.value.rollout_engine import resolve_rollout_engine

    monkeypatch.setattr(loading, "cpu_supports_bf16", lambda: False)
    monkeypatch.setattr(loading, "cpu_supports_fp16", lambda: False)
    assert resolve_rollout_engine("auto", "default-target", weights_loaded=False) == "llama-cpp"
    assert resolve_rollout_engine("auto", "default-target", weights_loaded=True) == "in-process"  # no second copy
    assert resolve_rollout_engine("in-process", "default-target", weights_loaded=False) == "in-process"
    monkeypatch.setattr(loading, "cpu_supports_bf16", lambda: True)
    assert resolve_rollout_engine("auto", "default-target", weights_loaded=False) == "in-process"
    assert resolve_rollout_engine("auto", "/models/saved-dir", weights_loaded=False) == "in-process"
