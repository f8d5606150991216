"""int8 linear layers (seed_tot/runtime/int8_linear.py): opt-in and lossy, so these tests check
that the product is the rounded product, which layers are rounded, and that a run records it."""

import json

import pytest
import torch
import torch.nn.functional as F
from click.testing import CliRunner

from seed_tot.models.loading import load_model
from seed_tot.models.tiny import build_tiny_pair
from seed_tot.runtime.int8_linear import Int8Linear, activation_levels, int8_layer_count, int8_works, rounded_product

needs_int8 = pytest.mark.skipif(not int8_works(), reason="this CPU or torch build has no fbgemm int8 product")


def _rounded_product(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """What the layer should compute: per-channel int8 weights, and the input rounded with one affine
    scale for the whole call, to the 8 or 7 bits this CPU's product sums exactly."""
    return rounded_product(x, weight, activation_levels())


@needs_int8
@pytest.mark.parametrize("rows", [1, 5, 32])
def test_the_int8_product_is_the_product_of_the_rounded_values(rows):
    generator = torch.Generator().manual_seed(rows)
    linear = torch.nn.Linear(96, 40, bias=False)
    with torch.no_grad():
        linear.weight.copy_(torch.randn(40, 96, generator=generator))
    x = torch.randn(rows, 96, generator=generator)
    got = Int8Linear(linear)(x)
    exact = F.linear(x, linear.weight.detach())
    rounded = _rounded_product(x, linear.weight.detach())
    scale = float(exact.abs().max())
    assert (got - rounded).abs().max() < 1e-4 * scale  # what rounding predicts
    assert (got - exact).abs().max() < 0.05 * scale  # and near the exact product, but not equal
    assert not torch.equal(got, exact)


@needs_int8
def test_full_scale_activations_do_not_overflow_the_product():
    """Large positive inputs against each row's largest weights: where the CPU's kernel adds pairs of
    8-bit products in 16 bits, they saturate unless activations are rounded to 7 bits."""
    generator = torch.Generator().manual_seed(11)
    weight = torch.randn(32, 128, generator=generator)
    weight[:, :16] = weight.abs().amax(dim=1, keepdim=True)
    x = torch.rand(6, 128, generator=generator) * 4
    x[:, :16] = 4.0
    linear = torch.nn.Linear(128, 32, bias=False)
    with torch.no_grad():
        linear.weight.copy_(weight)
    got = Int8Linear(linear)(x)
    rounded = _rounded_product(x, weight)
    assert (got - rounded).abs().max() < 1e-4 * float(rounded.abs().max())


@needs_int8
def test_the_product_uses_the_finest_activation_rounding_this_cpu_sums_exactly():
    from seed_tot.runtime.int8_linear import _exact_at, _prepack, _probe_case

    weight, x = _probe_case()
    packed = _prepack(weight, None)
    levels = activation_levels()
    assert _exact_at(levels, weight, x, packed)
    if levels == 127:  # 8 bits measured inexact here: the saturation the 7 bits avoid
        assert not _exact_at(255, weight, x, packed)


@needs_int8
def test_the_layer_keeps_its_inputs_dtype_and_shape_and_its_bias():
    linear = torch.nn.Linear(64, 24)
    x = torch.randn(2, 3, 64).bfloat16()
    got = Int8Linear(linear)(x)
    assert got.dtype == torch.bfloat16 and got.shape == (2, 3, 24)
    want = linear(x.float()).detach()
    assert (got.float() - want).abs().max() < 0.05 * float(want.abs().max())


@needs_int8
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_a_model_loaded_int8_rounds_every_linear_layer_but_the_down_projections(dtype):
    plain = load_model("tiny-target", dtype=dtype)
    rounded = load_model("tiny-target", dtype=dtype, int8=True)
    config = rounded.model.config
    linears = [m for m in plain.model.modules() if isinstance(m, torch.nn.Linear) or m.__class__.__name__ == "PackedLinear"]
    down = sum(m.in_features == config.intermediate_size for m in linears)
    assert down == config.num_hidden_layers
    assert rounded.int8_layers == len(linears) - down and plain.int8_layers == 0
    ids = torch.randint(0, 200, (2, 13), generator=torch.Generator().manual_seed(2))
    want, got = plain.forward(ids).float(), rounded.forward(ids).float()
    assert not torch.equal(got, want)
    step_ratio = 255 / activation_levels()  # 7-bit activations round in steps twice as wide
    assert (got - want).abs().max() < 0.2 * step_ratio * float(want.abs().max())


@needs_int8
def test_a_saved_model_is_rounded_layer_by_layer_as_it_loads(tmp_path):
    _, model, tokenizer = build_tiny_pair(seed=5, dtype=torch.bfloat16)
    model.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    from seed_tot.models.streamed_cast import load_streamed

    streamed = load_streamed(str(tmp_path), torch.bfloat16, int8=True)
    loaded = load_model(str(tmp_path), dtype="bfloat16", int8=True)
    assert int8_layer_count(streamed) == loaded.int8_layers > 0
    ids = torch.randint(0, 200, (1, 9), generator=torch.Generator().manual_seed(4))
    assert torch.equal(streamed(ids).logits, loaded.forward(ids))


@needs_int8
def test_an_int8_run_records_its_int8_layers_in_the_trace(tmp_path):
    from seed_tot.cli import main

    out = tmp_path / "run"
    result = CliRunner().invoke(main, ["gsm8k", "--tiny", "--int8", "--limit", "1", "--cot-samples", "1",
                                       "--max-new-tokens", "8", "--cot-max-new-tokens", "8", "--out", str(out)])
    assert result.exit_code == 0, (result.exception, result.output[-2000:])
    trace = json.loads(next((out / "traces").glob("*.json")).read_text())
    text = json.dumps(trace)
    assert '"int8": true' in text and '"int8_linear_layers": ' in text


@needs_int8
def test_the_product_benchmark_writes_every_width_and_shape(tmp_path):
    from script_helpers import load_script

    from seed_tot.runtime.packed_linear import packing_works

    if not packing_works(torch.bfloat16):
        pytest.skip("no packed bfloat16 product on this CPU")
    out = tmp_path / "bench.json"
    result = CliRunner().invoke(load_script("bench_int8_linear").main, [
        "--threads", "1", "--rows", "1,4", "--repeats", "1", "--shapes", "64x48,48x64", "--out", str(out)])
    assert result.exit_code == 0, result.output
    rows = json.loads(out.read_text())["results"]
    assert [(r["rows"], r["in"]) for r in rows] == [(1, 64), (1, 48), (4, 64), (4, 48)]
    assert all(r["bf16_packed_ms"] > 0 and r["int8_ms"] > 0 and r["int8_speedup"] > 0 for r in rows)


@needs_int8
def test_the_memory_budget_counts_the_packed_int8_weights():
    from seed_tot.scheduling.memory import model_weight_bytes

    plain = load_model("tiny-target", dtype="float32")
    rounded = load_model("tiny-target", dtype="float32", int8=True)
    names = [name for name, m in rounded.model.named_modules() if isinstance(m, Int8Linear)]
    before = sum(p.numel() * 4 for name in names for p in plain.model.get_submodule(name).parameters())
    after = sum(rounded.model.get_submodule(name).opaque_weight_bytes for name in names)
    values = sum(plain.model.get_submodule(name).weight.numel() for name in names)
    assert values < after < before  # a byte per value and a little per channel, where float32 took 4
    assert model_weight_bytes(rounded.model) == model_weight_bytes(plain.model) - before + after
