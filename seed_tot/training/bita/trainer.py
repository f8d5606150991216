"""Train BiTA's prompt and mask tokens on self-distillation samples; resumable.

An output directory holds `bita.safetensors` (the parameters, what `--method-option
checkpoint=...` loads), `train_state.safetensors` (Adam's moments, the step and the settings)
and `log.jsonl` (one line per step). Both safetensors files are replaced atomically every
`save_every` steps and at the end; rerunning the same command continues from the saved step.
The sample order and the anchors of step s depend only on (seed, s), so a resumed run takes
exactly the steps an uninterrupted one would.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

import torch

from seed_tot.decoding.bita_params import BitaPrompt, init_prompt, load_prompt, save_prompt
from seed_tot.errors import ConfigError
from seed_tot.runtime import ModelRunner
from seed_tot.training.bita.data import Sample
from seed_tot.training.bita.loss import sample_loss

PARAMS_FILE = "bita.safetensors"
STATE_FILE = "train_state.safetensors"
LOG_FILE = "log.jsonl"


@dataclass(frozen=True)
class TrainSettings:
    """`seed-tot train bita`'s settings: `steps` Adam steps (one sample each) peaking at `lr` after a
    linear warm-up of `warmup` steps, then cosine decay; `prefix_len` prompt and `masks` mask tokens,
    started from the model's tokens or at random (`init`, see init_prompt); saved every `save_every` steps."""

    steps: int = 300
    lr: float = 1e-2
    warmup: int = 10
    groups: int = 32  # mask groups per sample (per step)
    prefix_len: int = 16
    masks: int = 3
    init: str = "tokens"
    seed: int = 0
    save_every: int = 25

    def check(self) -> None:
        if self.steps < 1 or self.groups < 1 or self.save_every < 1 or self.lr <= 0 or self.warmup < 0:
            raise ConfigError("BiTA training needs steps, groups and save_every >= 1, lr > 0 and warmup >= 0.")


def learning_rate(settings: TrainSettings, step: int) -> float:
    """Linear warm-up, then cosine decay to zero at the last step."""
    if step < settings.warmup:
        return settings.lr * (step + 1) / settings.warmup
    span = max(1, settings.steps - settings.warmup)
    return settings.lr * 0.5 * (1 + math.cos(math.pi * min(1.0, (step - settings.warmup) / span)))


def sample_for_step(samples: list[Sample], seed: int, step: int) -> Sample:
    """Epoch-wise seeded shuffles: step s takes the (s mod N)-th sample of its epoch's permutation."""
    epoch, index = divmod(step, len(samples))
    order = torch.randperm(len(samples), generator=torch.Generator().manual_seed(seed * 100_003 + epoch))
    return samples[int(order[index])]


def _save_state(out: Path, optimizer: torch.optim.Optimizer, step: int, settings: TrainSettings, model: str) -> None:
    from safetensors.torch import save_file

    tensors = {}
    for index, state in optimizer.state_dict()["state"].items():
        for name, value in state.items():
            tensors[f"{index}.{name}"] = value.detach().float().reshape(-1) if name == "step" else value.detach().contiguous()
    meta = {"step": str(step), "settings": json.dumps(asdict(settings)), "model": model}
    temp = out / (STATE_FILE + ".tmp")
    save_file(tensors, str(temp), metadata=meta)
    temp.replace(out / STATE_FILE)


def _load_state(out: Path, optimizer: torch.optim.Optimizer) -> tuple[int, dict]:
    from safetensors import safe_open

    with safe_open(str(out / STATE_FILE), framework="pt") as handle:
        meta = handle.metadata()
        tensors = {name: handle.get_tensor(name) for name in handle.keys()}
    state: dict[int, dict] = {}
    for name, value in tensors.items():
        index, key = name.split(".", 1)
        state.setdefault(int(index), {})[key] = value.reshape(()) if key == "step" else value
    optimizer.load_state_dict({"state": state, "param_groups": optimizer.state_dict()["param_groups"]})
    return int(meta["step"]), json.loads(meta["settings"])


def _open(runner: ModelRunner, out: Path, settings: TrainSettings) -> tuple[BitaPrompt, torch.optim.Optimizer, int]:
    """Fresh parameters, or those of an earlier run in `out` with its optimizer state and step."""
    if (out / STATE_FILE).is_file() and (out / PARAMS_FILE).is_file():
        prompt = load_prompt(out / PARAMS_FILE)
        prompt.check_fits(runner)
        optimizer = torch.optim.Adam(prompt.parameters(), lr=settings.lr)
        step, saved = _load_state(out, optimizer)
        same = {k: v for k, v in saved.items() if k not in ("steps", "save_every")}
        mine = {k: v for k, v in asdict(settings).items() if k not in ("steps", "save_every")}
        if same != mine:
            changed = ", ".join(sorted(k for k in mine if mine[k] != same.get(k)))
            raise ConfigError(f"{out} holds a BiTA run with other settings ({changed}): resume with the same "
                              "settings (only --steps may change) or choose another --out.")
        return prompt, optimizer, step
    prompt = init_prompt(runner, settings.prefix_len, settings.masks, settings.seed, settings.init)
    return prompt, torch.optim.Adam(prompt.parameters(), lr=settings.lr), 0


def train_bita(
    runner: ModelRunner,
    samples: list[Sample],
    out: str | Path,
    settings: TrainSettings,
    on_step: Callable[[int, dict], None] | None = None,
) -> BitaPrompt:
    """Train (or continue training) until `settings.steps`; returns the trained parameters."""
    settings.check()
    if not samples:
        raise ConfigError("No BiTA training samples: collect some first (seed-tot train bita collects them).")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    prompt, optimizer, step = _open(runner, out, settings)
    prompt.meta.update({"model": runner.name, "trained_samples": len(samples)})
    with (out / LOG_FILE).open("a") as log:
        while step < settings.steps:
            started = time.perf_counter()
            sample = sample_for_step(samples, settings.seed, step)
            generator = torch.Generator().manual_seed(settings.seed * 1_000_003 + step)
            result = sample_loss(runner, prompt, sample.prompt_ids, sample.response_ids, settings.groups, generator)
            record = {"step": step + 1, "sample": sample.key, "lr": learning_rate(settings, step)}
            if result is not None:
                loss, counts = result
                for group in optimizer.param_groups:
                    group["lr"] = record["lr"]
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                loss = loss.detach()
                record.update(loss=round(loss.item(), 4), **counts)
            step += 1
            record["seconds"] = round(time.perf_counter() - started, 3)
            log.write(json.dumps(record) + "\n")
            log.flush()
            if step % settings.save_every == 0 or step == settings.steps:
                save_prompt(prompt, out / PARAMS_FILE, {"step": step})
                _save_state(out, optimizer, step, settings, runner.name)
            if on_step is not None:
                on_step(step, record)
    return prompt
