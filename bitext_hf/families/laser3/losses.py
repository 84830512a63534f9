"""Distillation losses as small ``nn.Module``s.

The cosine term is the shipped model's own (``Laser3Student.forward`` computes it when given teacher embeddings), so
training and the checkpoint's loss are one function.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from bitext_hf.errors import UsageError
from bitext_hf.modeling.laser3 import cosine_distillation_loss

__all__ = ["CosineDistillationLoss"]


class CosineDistillationLoss(nn.Module):
    """Cosine distillation: mean over the batch of ``1 - cos(student_i, teacher_i)``, plus an optional in-batch
    contrastive term (InfoNCE of each student vector against all teacher vectors of the batch, the diagonal being
    the positive).

    Inputs: ``student`` (batch, d) student sentence embeddings and ``teacher`` (batch, d) teacher embeddings of the
    same sentences (or their translations); neither needs to be normalised. Returns a scalar.

    Args:
        contrastive_weight: weight of the in-batch term (0 disables it, the paper's setting).
        temperature: softmax temperature of the contrastive term.
    """

    def __init__(self, contrastive_weight: float = 0.0, temperature: float = 0.05) -> None:
        super().__init__()
        if contrastive_weight < 0:
            raise UsageError(f"contrastive_weight must be non-negative, got {contrastive_weight}")
        if temperature <= 0:
            raise UsageError(f"temperature must be positive, got {temperature}")
        self.contrastive_weight = contrastive_weight
        self.temperature = temperature

    def forward(self, student: torch.Tensor, teacher: torch.Tensor) -> torch.Tensor:
        loss = cosine_distillation_loss(student, teacher)
        if self.contrastive_weight > 0 and student.shape[0] > 1:
            student_unit, teacher_unit = F.normalize(student, dim=-1), F.normalize(teacher.to(student.dtype), dim=-1)
            logits = student_unit @ teacher_unit.T / self.temperature
            targets = torch.arange(student.shape[0], device=student.device)
            loss = loss + self.contrastive_weight * F.cross_entropy(logits, targets)
        return loss
