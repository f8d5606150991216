"""A model whose activations go subnormal decodes at normal speed: every ModelRunner flushes
subnormal floats to zero on the CPU (torch.set_flush_denormal), in every process that runs a
model. Measured here with one thread: without flushing, the scaled model below runs 33-50x
slower than the same model unscaled; with flushing, 0.8-0.9x."""

import copy
import time

import torch
from transformers import Qwen2ForCausalLM

from seed_tot.models.tiny import byte_tokenizer, tiny_config
from seed_tot.runtime import ModelRunner

SCALE = 1e-39  # projection weights, and so every product through them, subnormal in float32


def model_of_width(hidden: int = 256) -> Qwen2ForCausalLM:
    """A random Qwen2 wide enough that its matrix products, not Python, set the forward's time."""
    config = tiny_config(300, None, None)
    config.hidden_size, config.intermediate_size, config.head_dim = hidden, 4 * hidden, 64
    config.num_attention_heads, config.num_key_value_heads = hidden // 64, 2
    torch.manual_seed(0)
    return Qwen2ForCausalLM(config).eval()


def scaled(model, scale: float):
    """The model with every projection weight (not embeddings, not the head) times `scale`."""
    model = copy.deepcopy(model)
    with torch.no_grad():
        for name, weight in model.named_parameters():
            if weight.dim() == 2 and "embed" not in name and "lm_head" not in name:
                weight.mul_(scale)
    return model


def seconds(runner: ModelRunner, ids: torch.Tensor, repeats: int = 3) -> float:
    started = time.perf_counter()
    for _ in range(repeats):
        runner.forward(ids, cache=None)
    return time.perf_counter() - started


def test_a_runner_flushes_subnormal_products_to_zero():
    torch.set_flush_denormal(False)
    runner = ModelRunner(model_of_width(64), byte_tokenizer(), "any")
    assert runner.flushes_subnormals
    assert float(torch.tensor([1e-30]) * torch.tensor([1e-10])) == 0.0  # 1e-40 is subnormal: flushed


def test_a_model_with_subnormal_activations_runs_at_normal_speed():
    model = model_of_width()
    normal = ModelRunner(model, byte_tokenizer(), "normal")
    tiny_values = ModelRunner(scaled(model, SCALE), byte_tokenizer(), "subnormal")
    ids = torch.randint(0, 200, (4, 32), generator=torch.Generator().manual_seed(0))
    seconds(normal, ids, 1), seconds(tiny_values, ids, 1)  # warm-up
    ratios = [seconds(tiny_values, ids) / seconds(normal, ids) for _ in range(3)]  # interleaved
    assert min(ratios) < 3.0, f"the subnormal model ran {min(ratios):.1f}x slower than the normal one"


PROBE = """
import torch
torch.set_num_threads(2)
{before}
from seed_tot.runtime.subnormals import flush_subnormals
import seed_tot.runtime
print("everywhere" if flush_subnormals() else "main thread only")
"""


def test_worker_threads_flush_subnormals_when_seed_tot_comes_first():
    import subprocess
    import sys

    first = subprocess.run([sys.executable, "-c", PROBE.format(before="")], capture_output=True, text=True)
    assert first.stdout.strip() == "everywhere", first.stderr
    # negative control: torch's worker threads started before the mode was set keep subnormals,
    # and the check says so (with a warning naming the fix)
    late = subprocess.run([sys.executable, "-c", PROBE.format(before="torch.ones(1 << 20).mul(2).sum()")],
                          capture_output=True, text=True)
    assert late.stdout.strip() == "main thread only" and "import seed_tot first" in late.stderr
