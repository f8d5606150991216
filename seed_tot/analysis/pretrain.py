"""Pretrain a small byte-level causal LM from scratch on a text corpus (next-token loss), resumably.

Batch `step` holds the texts `batch_size * step ...` of the training list, each starting at
position 0 and right-padded, so training sees exactly the prompt layout used at inference. Every
`save_every` steps the weights, optimizer and step go to <out>/pretrain_state.pt; a rerun with
the same settings continues from there. The finished model is written with save_pretrained
(model + tokenizer) so load_model(<out>) and `seed-tot train cllm --model <out>` accept it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

from seed_tot.errors import ConfigError
from seed_tot.models.tiny import byte_tokenizer, small_causal_lm

STATE_FILE = "pretrain_state.pt"
LOG_FILE = "pretrain_log.jsonl"
SETTINGS_FILE = "pretrain_settings.json"
DONE_FILE = "model.safetensors"  # written by save_pretrained at the end only


@dataclass(frozen=True)
class PretrainSettings:
    layers: int = 4
    hidden: int = 256
    intermediate: int = 768
    heads: int = 4
    kv_heads: int = 2
    steps: int = 2000
    batch_size: int = 32
    lr: float = 2e-3
    warmup: int = 100
    weight_decay: float = 0.01
    seed: int = 0
    save_every: int = 100


def learning_rate(step: int, settings: PretrainSettings) -> float:
    """Linear warm-up, then cosine decay to a tenth of the peak at the last step."""
    if step < settings.warmup:
        return settings.lr * (step + 1) / settings.warmup
    progress = (step - settings.warmup) / max(settings.steps - settings.warmup, 1)
    return settings.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(progress, 1.0))))


def batch_tensors(token_lists: list[list[int]], pad: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Right-padded input ids, attention mask and labels (-100 on pads)."""
    width = max(len(t) for t in token_lists)
    ids = torch.full((len(token_lists), width), pad, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for row, tokens in enumerate(token_lists):
        ids[row, : len(tokens)] = torch.tensor(tokens)
        mask[row, : len(tokens)] = 1
    return ids, mask, ids.masked_fill(mask == 0, -100)


def next_token_loss(model, ids: torch.Tensor, mask: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    logits = model(input_ids=ids, attention_mask=mask).logits[:, :-1]
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), labels[:, 1:].reshape(-1))


EXTENSIBLE = ("steps", "texts")  # a finished or stopped run may be extended with more steps on more texts


def _comparable(record: dict) -> dict:
    return {k: v for k, v in record.items() if k not in ("history",)} | {
        "settings": {k: v for k, v in record["settings"].items() if k != "steps"}, "texts": None,
        "corpus": {k: v for k, v in record["corpus"].items() if k != "train_texts"}}


def _check_settings(out: Path, record: dict) -> None:
    """Refuse other settings in `out`, except more steps on at least as many texts (an extension:
    the learning-rate schedule is then the longer run's from the step reached, a warm restart);
    every extension is kept in the record's history."""
    path = out / SETTINGS_FILE
    history = []
    if path.is_file():
        old = json.loads(path.read_text())
        history = old.get("history", [])
        same = _comparable(old) == _comparable(record)
        longer = record["settings"]["steps"] >= old["settings"]["steps"] and record["texts"] >= old["texts"]
        if not (same and longer):
            raise ConfigError(f"{out} holds a pretraining run with other settings ({path}): use a new directory.")
        if record["settings"]["steps"] != old["settings"]["steps"] or record["texts"] != old["texts"]:
            history.append({"steps": old["settings"]["steps"], "texts": old["texts"], "extended_to": [record["settings"]["steps"], record["texts"]]})
    path.write_text(json.dumps(record | {"history": history}, indent=1, sort_keys=True) + "\n")


def _saved_step(out: Path) -> int:
    return int(torch.load(out / STATE_FILE, weights_only=True)["step"]) if (out / STATE_FILE).is_file() else 0


def _drop_log_after(path: Path, step: int) -> None:
    """Keep the log rows of the steps a resumed run continues from (a stopped run logs past its last save)."""
    if path.is_file():
        rows = [line for line in path.read_text().splitlines(keepends=True) if line.endswith("\n") and json.loads(line)["step"] <= step]
        path.write_text("".join(rows))


def pretrain(
    texts: list[str], out: Path, settings: PretrainSettings, corpus_meta: dict | None = None,
    on_save: Callable[[int, torch.nn.Module], None] | None = None,
) -> Path:
    """Train a fresh model on `texts` (each followed by EOS) for settings.steps steps; the saved
    model directory. `on_save(step, model)` runs at each save (e.g. to evaluate)."""
    out.mkdir(parents=True, exist_ok=True)
    _check_settings(out, {"settings": asdict(settings), "corpus": corpus_meta or {}, "texts": len(texts)})
    if (out / DONE_FILE).is_file() and _saved_step(out) >= settings.steps:
        return out
    if len(texts) < settings.batch_size:
        raise ConfigError(f"{len(texts)} texts are fewer than one batch of {settings.batch_size}.")
    tokenizer = byte_tokenizer()
    eos, pad = tokenizer.eos_token_id, tokenizer.pad_token_id
    torch.manual_seed(settings.seed)
    model = small_causal_lm(len(tokenizer), settings.hidden, settings.intermediate, settings.layers,
                            settings.heads, settings.kv_heads, eos, pad)
    optimizer = torch.optim.AdamW(model.parameters(), lr=settings.lr, weight_decay=settings.weight_decay, betas=(0.9, 0.98))
    start = 0
    if (out / STATE_FILE).is_file():
        state = torch.load(out / STATE_FILE, weights_only=True)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        start = int(state["step"])
    _drop_log_after(out / LOG_FILE, start)
    encoded = [ids + [eos] for ids in tokenizer(texts, add_special_tokens=False)["input_ids"]]
    model.train()
    with open(out / LOG_FILE, "a") as log:
        for step in range(start, settings.steps):
            first = (step * settings.batch_size) % (len(texts) - settings.batch_size + 1)
            tokens = encoded[first : first + settings.batch_size]
            for group in optimizer.param_groups:
                group["lr"] = learning_rate(step, settings)
            loss = next_token_loss(model, *batch_tensors(tokens, pad))
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            log.write(json.dumps({"step": step + 1, "loss": loss.item(), "lr": learning_rate(step, settings)}) + "\n")
            log.flush()
            if (step + 1) % settings.save_every == 0 or step + 1 == settings.steps:
                tmp = out / (STATE_FILE + ".tmp")
                torch.save({"step": step + 1, "model": model.state_dict(), "optimizer": optimizer.state_dict()}, tmp)
                tmp.replace(out / STATE_FILE)
                if on_save is not None:
                    model.eval()
                    on_save(step + 1, model)
                    model.train()
    model.eval()
    tokenizer.save_pretrained(str(out))
    model.save_pretrained(str(out))  # written last: its presence marks the run finished
    return out
