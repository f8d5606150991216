"""Packed (pre-reordered) bfloat16 and float32 linear layers compute the plain layers' products."""

import copy
import os
from pathlib import Path

import pytest
import torch

from seed_tot.models.loading import load_model
from seed_tot.models.tiny import build_tiny_pair
from seed_tot.runtime import ModelRunner
from seed_tot.runtime.packed_linear import PackedLinear, pack_linear_layers, packing_works



def cpu_advertises_bf16() -> bool:
    """The CPU's own word (AVX-512 BF16 in /proc/cpuinfo), or SEED_TOT_EXPECT_PACKING=1."""
    if os.environ.get("SEED_TOT_EXPECT_PACKING") == "1":
        return True
    cpuinfo = Path("/proc/cpuinfo")
    return cpuinfo.is_file() and "avx512_bf16" in cpuinfo.read_text().split()


PACKING_EXPECTED = cpu_advertises_bf16()
# Where the CPU advertises bfloat16 products, a failing probe is a failure, never a skip.
needs_packing = pytest.mark.skipif(
    not PACKING_EXPECTED and not packing_works(torch.bfloat16),
    reason="this CPU has no AVX-512 BF16 and this torch build runs no packed bfloat16 product",
)


@pytest.mark.skipif(not PACKING_EXPECTED, reason="the CPU does not advertise AVX-512 BF16")
def test_packing_works_where_the_cpu_advertises_bfloat16():
    assert packing_works(torch.bfloat16)


def bf16_ulps_apart(got: torch.Tensor, want: torch.Tensor) -> float:
    """The largest difference in units of bfloat16's spacing at the reference's magnitude."""
    spacing = want.float().abs().clamp(min=1e-3) * 2.0**-7
    return float(((got.float() - want.float()).abs() / spacing).max())


@needs_packing
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("leading", [(1,), (7,), (3, 5), (2, 1, 4)])
def test_packed_linear_equals_the_plain_layer(bias, leading):
    generator = torch.Generator().manual_seed(len(leading) * 10 + bias)
    plain = torch.nn.Linear(96, 40, bias=bias).to(torch.bfloat16)
    with torch.no_grad():
        plain.weight.copy_(torch.randn(40, 96, generator=generator))
        if bias:
            plain.bias.copy_(torch.randn(40, generator=generator) * 4)
    x = torch.randn(*leading, 96, generator=generator).to(torch.bfloat16)
    with torch.inference_mode():
        got, want = PackedLinear(plain)(x), plain(x)
    assert got.shape == want.shape == (*leading, 40)
    assert got.dtype == torch.bfloat16
    assert bf16_ulps_apart(got, want) <= 2.0  # one rounding of the sum apart at most, not a different product


def layer_and_input(bias: bool = True):
    generator = torch.Generator().manual_seed(7)
    plain = torch.nn.Linear(96, 40, bias=bias).to(torch.bfloat16)
    with torch.no_grad():
        plain.weight.copy_(torch.randn(40, 96, generator=generator))
        if bias:
            plain.bias.copy_(torch.randn(40, generator=generator) * 4)
    return plain, torch.randn(3, 96, generator=generator).to(torch.bfloat16)


@needs_packing
@pytest.mark.parametrize("mutation", ["bias dropped", "weight scaled by 0.99", "rows shifted"])
def test_the_two_ulp_check_catches_a_wrong_packed_product(mutation):
    """Negative controls: a packed product that is subtly wrong fails the check the tests use."""
    plain, x = layer_and_input()
    wrong = copy.deepcopy(plain)
    with torch.no_grad():
        if mutation == "bias dropped":
            wrong.bias.zero_()
        elif mutation == "weight scaled by 0.99":
            wrong.weight.mul_(0.99)
    with torch.inference_mode():
        got, want = PackedLinear(wrong)(x), plain(x)
        if mutation == "rows shifted":
            got = got.roll(1, dims=0)
    assert bf16_ulps_apart(got, want) > 2.0


@needs_packing
def test_a_packed_tiny_model_gives_the_plain_models_logits():
    _, model, tokenizer = build_tiny_pair(seed=3, dtype=torch.bfloat16)
    packed_model = copy.deepcopy(model)
    linears = sum(type(m) is torch.nn.Linear for m in model.modules())
    assert pack_linear_layers(packed_model) == linears > 0
    assert not any(type(m) is torch.nn.Linear for m in packed_model.modules())
    plain, packed = ModelRunner(model, tokenizer, "plain"), ModelRunner(packed_model, tokenizer, "packed")
    assert (packed.packed_layers, plain.packed_layers) == (linears, 0)
    assert packed.vocab_size == plain.vocab_size
    ids = torch.randint(0, 200, (3, 17), generator=torch.Generator().manual_seed(1))
    got, want = packed.forward(ids), plain.forward(ids)
    assert torch.allclose(got, want, atol=0.05 * float(want.abs().max()))
    assert (got.argmax(-1) == want.argmax(-1)).float().mean() > 0.95


@needs_packing
def test_the_memory_plan_counts_packed_weights_as_the_plain_ones():
    from seed_tot.scheduling.memory import model_weight_bytes, plan_for_models

    _, model, tokenizer = build_tiny_pair(seed=3, dtype=torch.bfloat16)
    packed_model = copy.deepcopy(model)
    pack_linear_layers(packed_model)
    assert model_weight_bytes(packed_model) == model_weight_bytes(model)  # a packed weight has no storage pointer
    plan = plan_for_models(8 << 30, ModelRunner(packed_model, tokenizer, "packed"), None, 64)
    assert plan.prefix_cache_mb > 0


@needs_packing
def test_a_packed_model_keeps_its_weights_identity():
    """A learned judge's head names its target by this fingerprint: packing must not change it."""
    from seed_tot.models.fingerprint import weights_fingerprint

    _, model, _ = build_tiny_pair(seed=3, dtype=torch.bfloat16)
    packed_model = copy.deepcopy(model)
    pack_linear_layers(packed_model)
    assert weights_fingerprint(packed_model) == weights_fingerprint(model)
    assert weights_fingerprint(packed_model) == weights_fingerprint(build_tiny_pair(seed=3, dtype=torch.float32)[1])


@needs_packing
def test_load_model_packs_bfloat16_only_and_obeys_the_switch(monkeypatch):
    assert load_model("tiny-target", dtype="bfloat16").packed_layers > 0
    assert load_model("tiny-target", dtype="float16").packed_layers == 0
    assert load_model("tiny-target", dtype="float32").packed_layers == 0
    monkeypatch.setenv("SEED_TOT_PACK_WEIGHTS", "0")
    assert load_model("tiny-target", dtype="bfloat16").packed_layers == 0


def test_packing_is_refused_for_float16_and_small_float32_layers():
    assert not packing_works(torch.float16)
    model = build_tiny_pair(dtype=torch.float32)[1]
    assert pack_linear_layers(model) == 0  # the tiny models' layers are below MIN_FLOAT32_WEIGHTS


@pytest.mark.skipif(not packing_works(torch.float32), reason="this torch build runs no packed float32 product")
def test_a_packed_float32_layer_computes_the_plain_product():
    generator = torch.Generator().manual_seed(7)
    plain = torch.nn.Linear(512, 2048)
    with torch.no_grad():
        plain.weight.copy_(torch.randn(2048, 512, generator=generator))
    for rows in (1, 5, 33):
        x = torch.randn(rows, 512, generator=generator)
        with torch.inference_mode():
            got, want = PackedLinear(plain)(x), plain(x)
        assert got.dtype == torch.float32
        assert (got - want).abs().max() <= 1e-5 * float(want.abs().max())  # float32 rounding, not another product


def test_float32_layers_are_packed_by_size_and_by_the_timed_probe(monkeypatch):
    import seed_tot.runtime.packed_linear as packed_linear

    if not packing_works(torch.float32):
        pytest.skip("this torch build runs no packed float32 product")
    large = torch.nn.Linear(1024, 1024)  # exactly MIN_FLOAT32_WEIGHTS values
    small = torch.nn.Linear(1024, 1023)
    monkeypatch.setattr(packed_linear, "float32_packing_pays", lambda: True)
    assert packed_linear.should_pack(large) and not packed_linear.should_pack(small)
    # a copy: Module.to converts in place, and `large` must stay float32 below
    assert packed_linear.should_pack(copy.deepcopy(large).to(torch.bfloat16)) == packing_works(torch.bfloat16)
    monkeypatch.setattr(packed_linear, "float32_packing_pays", lambda: False)
    assert not packed_linear.should_pack(large)
    monkeypatch.setenv("SEED_TOT_PACK_WEIGHTS", "0")
    monkeypatch.setattr(packed_linear, "float32_packing_pays", lambda: True)
    assert not packed_linear.should_pack(large)



@needs_packing
def test_packing_leaves_no_tensor_viewing_the_loaded_storage():
    """A loaded model's tensors are views of one mapped file; once its linear layers are packed,
    the tensors left in place (embedding, norms, biases) must not keep that storage alive, or its
    pages stay resident beside the packed copies."""
    loaded = torch.zeros(4096, dtype=torch.bfloat16)  # stands in for the mapped weights file
    model = torch.nn.Sequential(torch.nn.Embedding(16, 32), torch.nn.Linear(32, 48), torch.nn.LayerNorm(48))
    model = model.to(torch.bfloat16)
    with torch.no_grad():
        offset = 0
        for parameter in model.parameters():
            parameter.data = loaded[offset:offset + parameter.numel()].view_as(parameter)
            offset += parameter.numel()
    x = torch.tensor([[1, 5, 7]])
    with torch.inference_mode():
        want = model(x)
    assert pack_linear_layers(model) == 1
    storage = loaded.untyped_storage().data_ptr()
    tensors = [*model.parameters(), *(b for b in model.buffers() if b.layout == torch.strided)]
    assert tensors and all(t.untyped_storage().data_ptr() != storage for t in tensors)
    with torch.inference_mode():
        assert bf16_ulps_apart(model(x), want) <= 2.0


@needs_packing
@pytest.mark.parametrize("stored", [torch.bfloat16, torch.float32])
def test_a_saved_model_loads_packed_layer_by_layer_with_the_plain_loads_logits(stored, tmp_path, monkeypatch):
    """A saved folder in the computing dtype is read tensor by tensor and packed as each layer
    arrives (the plain copies never pile up); it must compute what the plain load computes."""
    from seed_tot.models.fingerprint import weights_fingerprint

    _, model, _ = build_tiny_pair(seed=5, dtype=stored)
    model.save_pretrained(tmp_path)
    build_tiny_pair(seed=5)[2].save_pretrained(tmp_path)
    packed = load_model(str(tmp_path), dtype="bfloat16")
    monkeypatch.setenv("SEED_TOT_PACK_WEIGHTS", "0")
    plain = load_model(str(tmp_path), dtype="bfloat16")
    linears = sum(type(m) is torch.nn.Linear for m in plain.model.modules())
    assert (packed.packed_layers, plain.packed_layers) == (linears, 0) and linears > 0
    assert not any(t.is_meta for t in [*packed.model.parameters(), *packed.model.buffers()])
    assert weights_fingerprint(packed.model) == weights_fingerprint(plain.model)
    from seed_tot.models.streamed_cast import load_streamed
    from seed_tot.runtime.packed_linear import packed_layer_count

    monkeypatch.delenv("SEED_TOT_PACK_WEIGHTS")  # packing on again for the streamed load
    assert packed_layer_count(load_streamed(str(tmp_path), torch.bfloat16, pack=True)) == linears  # as they arrive
    ids = torch.randint(0, 200, (2, 13), generator=torch.Generator().manual_seed(2))
    got, want = packed.forward(ids), plain.forward(ids)
    assert torch.allclose(got, want, atol=0.05 * float(want.abs().max()))
    assert (got.argmax(-1) == want.argmax(-1)).float().mean() > 0.95
