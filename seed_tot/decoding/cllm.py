"""CLLM decoding: Jacobi decoding of a model fine-tuned to converge in fewer iterations.

The checkpoint (seed-tot train cllm) is applied to a copy of the target's model, so greedy output
is exactly the trained model's own autoregressive output (Jacobi decoding is lossless); the
untrained target stays as it was for the other methods. Trained copies are kept per (target,
checkpoint), so a search's many requests load the checkpoint once.
"""

from __future__ import annotations

import copy

from seed_tot.config import DecodeConfig
from seed_tot.decoding.jacobi import jacobi_decode
from seed_tot.decoding.output import DecodeOutput
from seed_tot.errors import ConfigError
from seed_tot.models.checkpoints import apply_checkpoint, read_meta, resolve_checkpoint
from seed_tot.runtime import ModelRunner

DEFAULT_BLOCK_SIZE = 16  # the block the paper trains and decodes with (n = 16 on GSM8K)
_TRAINED: dict[tuple[int, str], ModelRunner] = {}


def trained_runner(target: ModelRunner, checkpoint: str) -> ModelRunner:
    """A runner of the target's model with the checkpoint applied (cached)."""
    path = resolve_checkpoint(checkpoint)
    key = (id(target.model), str(path.resolve()))
    if key not in _TRAINED:
        if target.packed_layers:
            raise ConfigError(
                "A CLLM checkpoint cannot be applied to packed bfloat16 weights: load the target in float32 "
                "or float16 (--dtype), or set SEED_TOT_PACK_WEIGHTS=0."
            )
        model = copy.deepcopy(target.model)
        apply_checkpoint(model, path)
        runner = ModelRunner(model, target.tokenizer, f"{target.name}+cllm:{path.name}")
        runner.eos_token_ids = target.eos_token_ids
        _TRAINED[key] = runner
    return _TRAINED[key]


def cllm_decode(
    target: ModelRunner, prompt_ids: list[int], config: DecodeConfig, seed: int = 0,
    checkpoint: str | None = None,
    block_size: int | None = None,
) -> DecodeOutput:
    """Jacobi decoding of the target with a CLLM checkpoint applied; blocks of `block_size` tokens
    (default: the block the checkpoint was trained with)."""
    if not checkpoint:
        raise ConfigError("--method cllm needs a trained checkpoint: --method-option checkpoint=NAME_OR_PATH.")
    checkpoint = str(checkpoint)
    runner = trained_runner(target, checkpoint)
    if block_size is None:
        block_size = int(read_meta(resolve_checkpoint(checkpoint)).get("block_size", DEFAULT_BLOCK_SIZE))
    return jacobi_decode(runner, prompt_ids, config, seed=seed, block_size=int(block_size))
