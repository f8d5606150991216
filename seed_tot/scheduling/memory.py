"""A run's memory budget (`--max-memory`): what the models' weights take, what is left for the KV
of the rows in flight and for the prefix cache, and the one-sentence refusal of a run that cannot
fit even one row at a time.

The batched executors hold every row's KV until the row ends, so the budget bounds the tokens they
hold at once (`max_kv_tokens`: each row counts its prompt plus the most tokens it may generate);
requests beyond it wait in the queue until rows end. The prefix cache gets a share of what the
weights leave, and a reserve covers the interpreter, the libraries and one forward's activations.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from seed_tot.errors import ConfigError

GIB = 2**30
MIB = 2**20
RUNTIME_RESERVE = 1 * GIB  # interpreter + torch + tokenizer + one wide forward's activations (measured ~0.7-0.9 GiB)
WORKER_RESERVE = GIB // 2  # a draft worker process: interpreter + torch (measured 0.37 GiB) + one row's forward
PREFIX_CACHE_SHARE = 0.2  # at most this share of what the weights leave goes to the prefix cache
KV_SHARE = 0.8  # of the rest, the rows' KV; the remainder absorbs the forward's transient tensors
ONE_ROW_TOKENS = 2048  # a row the run must be able to hold: a long prompt and its chain of thought
DEFAULT_SHARE_OF_RAM = 0.5
DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "F32": 4, "F16": 2, "BF16": 2}

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(i?b)?\s*$", re.IGNORECASE)


def parse_size(text: str) -> int:
    """'8G', '8GiB', '512M', '12.5g' -> bytes (binary units; a bare number is GiB)."""
    match = _SIZE.match(str(text))
    if not match:
        raise ConfigError(f"Bad --max-memory {text!r}: give a size such as 8G, 12.5GiB or 6000M.")
    number, unit = float(match.group(1)), (match.group(2) or "g").lower()
    size = int(number * {"k": 2**10, "m": MIB, "g": GIB, "t": 2**40}[unit])
    if size <= 0:
        raise ConfigError(f"Bad --max-memory {text!r}: give a positive size such as 8G.")
    return size


def machine_ram_bytes() -> int:
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def default_budget() -> int:
    """Half of the machine's RAM: room for the user's browser and editor beside the run."""
    return int(machine_ram_bytes() * DEFAULT_SHARE_OF_RAM)


def gib(size: int) -> str:
    """A size in the largest binary unit it fills (1 MiB, not 0.0 GiB)."""
    for unit, scale in (("TiB", 2**40), ("GiB", GIB), ("MiB", MIB), ("KiB", 2**10)):
        if size >= scale:
            return f"{size / scale:.1f} {unit}"
    return f"{size} bytes"


@dataclass(frozen=True)
class MemoryPlan:
    budget_bytes: int
    weights_bytes: int
    kv_bytes_per_token: int
    prefix_cache_mb: float
    max_kv_tokens: int

    def record(self) -> dict:
        """What the trace and the run totals record."""
        return {**asdict(self), "runtime_reserve_bytes": RUNTIME_RESERVE}


def plan_memory(budget: int, weights_bytes: int, kv_bytes_per_token: int, wanted_prefix_cache_mb: float) -> MemoryPlan:
    """Split `budget` between the weights, the prefix cache and the rows' KV; refuse one sentence
    when not even one row fits beside the weights."""
    free = budget - RUNTIME_RESERVE - weights_bytes
    one_row = ONE_ROW_TOKENS * kv_bytes_per_token
    if free < one_row / KV_SHARE:
        least = RUNTIME_RESERVE + weights_bytes + one_row / KV_SHARE
        raise ConfigError(f"--max-memory {gib(budget)} cannot hold this run even one row at a time (weights "
                          f"{gib(weights_bytes)}, runtime ~{gib(RUNTIME_RESERVE)}): give --max-memory of at least "
                          f"{gib(int(least) + GIB // 10)}, or a smaller --dtype or model.")
    prefix_bytes = min(wanted_prefix_cache_mb * MIB, PREFIX_CACHE_SHARE * free)
    max_kv_tokens = int((free - prefix_bytes) * KV_SHARE // kv_bytes_per_token)
    return MemoryPlan(budget, weights_bytes, kv_bytes_per_token, round(prefix_bytes / MIB, 1), max_kv_tokens)


def kv_bytes_per_token(config: dict, dtype_bytes: int) -> int:
    """Keys and values of one token over every layer, from a transformers config (as a dict)."""
    heads = config.get("num_attention_heads") or 1
    head_dim = config.get("head_dim") or config["hidden_size"] // heads
    kv_heads = config.get("num_key_value_heads") or heads
    return 2 * config["num_hidden_layers"] * kv_heads * head_dim * dtype_bytes


def engine_slots(width: int, ctx_per_slot: int, kv_bytes_per_token: int, free_bytes: int) -> int:
    """An engine's slots for a run of `width` rows at once: one a row, so no chain waits for another
    to end (the calibration timed the engine that way), as many as the KV share of `free_bytes` (the
    budget less the engine's weights) holds, since an engine allocates every slot's KV at start."""
    held = int((free_bytes - RUNTIME_RESERVE) * KV_SHARE) // (ctx_per_slot * kv_bytes_per_token)
    return max(1, min(width, held))


def kv_bytes_beside(gguf_file: str, dtype_bytes: int = 2) -> int | None:
    """KV bytes per token (float16, llama.cpp's default) of a GGUF file with its transformers
    config.json beside it, as `seed-tot models pull` keeps them; None without one."""
    config = saved_config(Path(gguf_file).parent)
    return kv_bytes_per_token(config, dtype_bytes) if config else None


def model_weight_bytes(model) -> int:
    """What a loaded model's parameters and buffers take in memory, and the weights some modules keep
    in an opaque packed form (int8 layers: `opaque_weight_bytes`)."""
    tensors = list(model.parameters()) + list(model.buffers())
    seen, total = set(), 0
    for tensor in tensors:  # tied weights (embeddings = lm_head) count once
        # a weight packed for oneDNN (bfloat16 CPUs) has no storage to share: it is its own
        key = ("packed", id(tensor)) if tensor.is_mkldnn else tensor.data_ptr()
        if key not in seen:
            seen.add(key)
            total += tensor.numel() * tensor.element_size()
    return total + sum(getattr(module, "opaque_weight_bytes", 0) for module in model.modules())


def stored_weight_bytes(model_dir: Path, dtype_bytes: int) -> int | None:
    """The weights of a saved transformers model once loaded at `dtype_bytes` per value, read from
    the safetensors headers (no tensor is loaded; an output head tied to the embeddings counts
    once); None when the folder holds no safetensors."""
    files = sorted(Path(model_dir).glob("*.safetensors"))
    if not files:
        return None
    from seed_tot.models.streamed_cast import safetensors_header

    tied = bool((saved_config(model_dir) or {}).get("tie_word_embeddings"))
    values = 0
    for path in files:
        for name, entry in safetensors_header(path)[0].items():
            if not (tied and name == "lm_head.weight"):
                count = 1
                for dim in entry["shape"]:
                    count *= dim
                values += count
    return values * dtype_bytes


def saved_config(model_dir: Path) -> dict | None:
    path = Path(model_dir) / "config.json"
    return json.loads(path.read_text()) if path.is_file() else None


@dataclass(frozen=True)
class ModelLoad:
    """A model a run loads before it starts: by name, at `dtype_bytes` per value, in `copies`
    processes (a SEED run's draft is loaded once by each draft worker)."""

    name: str
    dtype_bytes: int
    copies: int = 1


def check_before_loading(budget: int, loads: list[ModelLoad], extra_processes: int = 0) -> None:
    """Refuse, before any model loads, a budget that cannot hold the runs' weights (every copy),
    one row of each model and a runtime per process; a model whose files say nothing of its size
    is checked after loading instead. `extra_processes`: processes beside this one (draft workers)."""
    from seed_tot.models.loading import local_model_dir

    weights, per_token = 0, 0
    for load in loads:
        model_dir = local_model_dir(load.name)
        config = saved_config(model_dir) if model_dir is not None else None
        size = stored_weight_bytes(model_dir, load.dtype_bytes) if model_dir is not None else None
        if config is None or size is None:
            return
        weights += size * load.copies
        per_token += kv_bytes_per_token(config, load.dtype_bytes)
    plan_memory(budget, weights + extra_processes * WORKER_RESERVE, per_token, 0)


def plan_for_models(budget: int, target, draft, wanted_prefix_cache_mb: float) -> MemoryPlan:
    """The plan for loaded models: both models' weights and KV; a draft keeps its own prefix cache,
    so each cache gets half of the prefix share."""
    from seed_tot.models.loading import dtype_name

    runners = [target] + ([draft] if draft is not None else [])
    weights = sum(model_weight_bytes(r.model) for r in runners)
    per_token = sum(kv_bytes_per_token(r.model.config.to_dict(), DTYPE_BYTES[dtype_name(r.dtype)])
                    for r in runners)
    plan = plan_memory(budget, weights, per_token, wanted_prefix_cache_mb * len(runners))
    if draft is None:
        return plan
    return replace(plan, prefix_cache_mb=round(plan.prefix_cache_mb / 2, 1))
