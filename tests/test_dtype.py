"""Which dtype 'auto' picks on a CPU, and the float16 overflow guard."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from seed_tot.errors import NumericOverflowError
from seed_tot.models import loading
from seed_tot.models.tiny import build_tiny_pair
from seed_tot.runtime import ModelRunner

CPU = torch.device("cpu")


@pytest.mark.parametrize(
    "flags,expected",
    [
        ({"avx512_fp16", "avx512_bf16"}, torch.float16),
        ({"amx_fp16"}, torch.float16),
        ({"avx512_bf16"}, torch.bfloat16),
        ({"avx2"}, torch.float32),
    ],
)
def test_auto_dtype_follows_the_cpus_native_arithmetic(monkeypatch, flags, expected):
    monkeypatch.setattr(loading, "cpu_flags", lambda: frozenset(flags))
    assert loading.resolve_dtype("auto", CPU, "default-target") == expected
    assert loading.resolve_dtype("auto", CPU, "tiny-target") == torch.float32
    assert loading.resolve_dtype("bfloat16", CPU, "default-target") == torch.bfloat16


def test_pulled_weights_stay_bfloat16_where_float16_computes(monkeypatch):
    monkeypatch.setattr(loading, "cpu_flags", lambda: frozenset({"avx512_fp16"}))
    assert loading.resolve_storage_dtype("auto", CPU) == torch.bfloat16
    assert loading.resolve_storage_dtype("float32", CPU) == torch.float32
    monkeypatch.setattr(loading, "cpu_flags", lambda: frozenset())
    assert loading.resolve_storage_dtype("auto", CPU) == torch.float32


def amplified_target(dtype: torch.dtype) -> ModelRunner:
    """The tiny target with every hidden linear layer's weights x40: its activations pass float16's
    65,504 but stay far inside float32's range."""
    _, model, tokenizer = build_tiny_pair(seed=0, dtype=dtype)
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, torch.nn.Linear) and module is not model.get_output_embeddings():
                module.weight.mul_(40)
    return ModelRunner(model, tokenizer, "amplified")


def test_float16_overflow_is_refused_in_one_sentence():
    ids = torch.tensor([list(range(5, 25))])
    runner = amplified_target(torch.float16)
    with torch.inference_mode():
        assert not torch.isfinite(runner.model(input_ids=ids).logits).all()  # the model really overflows
    with pytest.raises(NumericOverflowError, match=r"^Model 'amplified' overflowed float16 .*--dtype bfloat16"):
        runner.forward(ids)


def test_the_same_model_in_float32_is_finite_and_passes():
    logits = amplified_target(torch.float32).forward(torch.tensor([list(range(5, 25))]))
    assert torch.isfinite(logits).all()


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_16_bit_ragged_batches_with_pads_complete_and_are_recorded(tmp_path, dtype):
    """Pads, joins and drafts in float16 leave every logit finite (no false overflow alarm), and
    bfloat16 runs on packed linear layers where the CPU has them: a tiny run completes, and its
    run record and traces say which dtype computed them and how many layers were packed."""
    from seed_tot.runtime.packed_linear import packing_works

    out = tmp_path / "run"
    proc = subprocess.run(
        [sys.executable, "-m", "seed_tot", "gsm8k", "--tiny", "--search", "bfs", "--dtype", dtype, "--method", "batched-lookup",
         "--depth", "1", "--thoughts", "2", "--max-new-tokens", "8", "--value-max-new-tokens", "6",
         "--limit", "3", "--concurrency", "3", "--out", str(out)],
        capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert len(records) == 3
    run = json.loads((out / "runs.jsonl").read_text())
    assert run["new_tokens"] > 0 and run["dtype"] == dtype
    packs = dtype == "bfloat16" and packing_works(torch.bfloat16)
    assert (run["packed_linear_layers"] > 0) == packs
    assert json.loads(Path(records[0]["trace_path"]).read_text())["config"]["dtype"] == dtype


def test_overflow_check_catches_one_bad_logit_and_passes_the_largest_finite_ones():
    from seed_tot.runtime.runner import refuse_overflow

    largest = torch.full((64, 1, 1000), 65504.0)  # every logit at float16's maximum: still finite
    refuse_overflow(largest, "m")
    for bad in (float("inf"), float("-inf"), float("nan")):
        logits = largest.clone()
        logits[37, 0, 512] = bad
        with pytest.raises(NumericOverflowError):
            refuse_overflow(logits, "m")
