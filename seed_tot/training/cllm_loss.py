"""The CLLM objective: global consistency loss (any Jacobi state -> its fixed point) plus the AR loss.

Following the reference implementation (hao-ai-lab/Consistency_LLM, cllm/cllm_trainer_global.py):
one random intermediate state per block; the teacher distribution is the model's own (detached)
output on the fixed point; positions before the state's first wrong token are left out (their
inputs equal the teacher's, so their loss is zero anyway); the AR loss is label-smoothed (0.1)
cross-entropy on the model's own generated tokens, weighted 10 against the consistency loss.
The consistency term is written as the forward KL D(teacher || student), which differs from the
reference's soft cross-entropy by the teacher's entropy, a constant: the gradient is the same.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from seed_tot.training.cllm_trajectory import BlockTrajectory

AR_WEIGHT = 10.0
LABEL_SMOOTHING = 0.1


@dataclass
class LossParts:
    total: torch.Tensor
    consistency: float
    ar: float


def _logits(model: torch.nn.Module, ids: list[int], keep: int) -> torch.Tensor:
    """float32 logits of the last `keep` positions of `ids` (one sequence)."""
    out = model(input_ids=torch.tensor([ids], device=model.device), logits_to_keep=keep + 1)
    return out.logits[0, :-1].float()  # logits at position t predict token t + 1: the last predicts nothing we have


def first_difference(state: list[int], fixed_point: list[int]) -> int:
    return next((i for i, (a, b) in enumerate(zip(state, fixed_point)) if a != b), len(fixed_point))


def forward_kl(student_logits: torch.Tensor, teacher_logits: torch.Tensor) -> torch.Tensor:
    """Mean over positions of KL(teacher || student), the teacher taken as a constant."""
    teacher = F.log_softmax(teacher_logits.detach(), dim=-1)
    student = F.log_softmax(student_logits, dim=-1)
    return (teacher.exp() * (teacher - student)).sum(-1).mean()


def cllm_loss(
    model: torch.nn.Module, block: BlockTrajectory, rng: random.Random, ar_weight: float = AR_WEIGHT
) -> LossParts:
    """Consistency + ar_weight * AR loss of one block (two forwards, one of them the teacher's)."""
    n = len(block.fixed_point)
    generated = len(block.context_ids) - block.prompt_length + n
    fixed_ids = block.context_ids + block.fixed_point
    fixed_logits = _logits(model, fixed_ids, generated)  # predicts the generated tokens
    targets = torch.tensor(fixed_ids[-generated:], device=fixed_logits.device)
    ar = F.cross_entropy(fixed_logits, targets, label_smoothing=LABEL_SMOOTHING)
    total = ar_weight * ar
    consistency = 0.0
    unconverged = [state for state in block.states if state != block.fixed_point]
    if unconverged:
        state = rng.choice(unconverged)
        start = first_difference(state, block.fixed_point)
        student = _logits(model, block.context_ids + state, n)[start:]
        kl = forward_kl(student, fixed_logits[-n:][start:])
        total = total + kl
        consistency = kl.item()
    return LossParts(total, consistency, ar.item())
