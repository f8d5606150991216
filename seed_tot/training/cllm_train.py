"""CLLM fine-tuning on collected Jacobi trajectories: full weights (small models) or LoRA (peft).

Resumable: every `save_every` steps (and at the end) the trainable weights, the optimizer and the
step are written to <out>/train_state.pt and the checkpoint (safetensors) to <out>; a rerun with
the same out directory continues from the saved step. Each step's losses go to <out>/train_log.jsonl.
"""

from __future__ import annotations

import json
import random
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from tqdm import tqdm

from seed_tot.errors import ConfigError
from seed_tot.models.checkpoints import save_full, save_lora
from seed_tot.training.cllm_loss import AR_WEIGHT, cllm_loss
from seed_tot.training.cllm_trajectory import BlockTrajectory

STATE_FILE = "train_state.pt"
LOG_FILE = "train_log.jsonl"


@dataclass(frozen=True)
class TrainSettings:
    """`seed-tot train cllm`'s settings: `steps` AdamW steps at `lr` (the CLI gives 2e-4 for LoRA and 2e-5
    for full weights), LoRA of rank `lora_r` and alpha `lora_alpha` unless `lora` is off, the AR loss
    weighted by `ar_weight` beside the consistency loss; saved every `save_every` steps."""

    steps: int = 200
    lr: float = 2e-4
    lora: bool = True
    lora_r: int = 16
    lora_alpha: int = 32
    ar_weight: float = AR_WEIGHT
    seed: int = 0
    save_every: int = 25


def add_lora(model: torch.nn.Module, settings: TrainSettings):
    try:
        from peft import LoraConfig, get_peft_model
    except ImportError as exc:
        raise ConfigError("LoRA training needs peft: pip install 'seed-tot[train]' (or train full weights).") from exc
    config = LoraConfig(r=settings.lora_r, lora_alpha=settings.lora_alpha, lora_dropout=0.0, target_modules="all-linear")
    return get_peft_model(model, config)


def trainable_state(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {name: p.detach().clone() for name, p in model.named_parameters() if p.requires_grad}


def save_progress(model, optimizer, step: int, out: Path, settings: TrainSettings, meta: dict) -> None:
    meta = meta | {"steps_done": step, "train_settings": asdict(settings)}
    if settings.lora:
        save_lora(model, out, meta)
    else:
        save_full(model, out, meta)
    tmp = out / (STATE_FILE + ".tmp")
    torch.save({"step": step, "trainable": trainable_state(model), "optimizer": optimizer.state_dict()}, tmp)
    tmp.replace(out / STATE_FILE)


def resume(model, optimizer, out: Path) -> int:
    """Restore the saved trainable weights and optimizer; the step to continue from (0: fresh)."""
    path = out / STATE_FILE
    if not path.is_file():
        return 0
    state = torch.load(path, weights_only=True)
    params = dict(model.named_parameters())
    with torch.no_grad():
        for name, value in state["trainable"].items():
            params[name].copy_(value)
    optimizer.load_state_dict(state["optimizer"])
    return int(state["step"])


def train_cllm(
    model: torch.nn.Module, blocks: list[BlockTrajectory], out: Path, settings: TrainSettings, meta: dict,
    progress: bool = True,
) -> torch.nn.Module:
    """Train `model` (a plain float32 torch model) on `blocks`; returns the trained (peft) model."""
    if not blocks:
        raise ConfigError("No trajectories to train on: collect some first.")
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(settings.seed)
    if settings.lora:
        model = add_lora(model, settings)
    model.train()
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=settings.lr, weight_decay=0.0)
    start = resume(model, optimizer, out)
    order = random.Random(settings.seed)
    schedule = [i for _ in range(settings.steps // len(blocks) + 1) for i in order.sample(range(len(blocks)), len(blocks))]
    with open(out / LOG_FILE, "a") as log, tqdm(total=settings.steps, initial=start, disable=not progress, desc="cllm train") as bar:
        for step in range(start, settings.steps):
            rng = random.Random(settings.seed * 1_000_003 + step)
            parts = cllm_loss(model, blocks[schedule[step]], rng, settings.ar_weight)
            optimizer.zero_grad()
            parts.total.backward()
            optimizer.step()
            log.write(json.dumps({"step": step + 1, "loss": parts.total.item(), "consistency": parts.consistency, "ar": parts.ar}) + "\n")
            log.flush()
            bar.update(1)
            bar.set_postfix(consistency=f"{parts.consistency:.3f}", ar=f"{parts.ar:.3f}")
            if (step + 1) % settings.save_every == 0 or step + 1 == settings.steps:
                save_progress(model, optimizer, step + 1, out, settings, meta)
    model.eval()
    return model
