"""LASER3 distillation's training loss, in the shape every family's loss has here: an ``nn.Module`` whose
``forward(model, batch)`` returns ``(loss, logged parts)`` (``BitextTrainer(loss_fn=...)``), with the paper's
``citation``.

The cosine term is the shipped model's own (``Laser3Student.forward`` computes it when given teacher embeddings), so
training and the checkpoint's loss are one function.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from bitext_hf.errors import UsageError
from bitext_hf.modeling.laser3 import cosine_distillation_loss

__all__ = ["DistillationLoss", "distillation_term"]


def distillation_term(
    student: torch.Tensor, teacher: torch.Tensor, contrastive_weight: float = 0.0, temperature: float = 0.05
) -> torch.Tensor:
    """Cosine distillation: mean over the batch of ``1 - cos(student_i, teacher_i)``, plus an optional in-batch
    contrastive term (InfoNCE of each student vector against all teacher vectors of the batch, the diagonal being
    the positive) weighted by ``contrastive_weight`` (0: the paper's loss).

    ``student`` (batch, d) student sentence embeddings and ``teacher`` (batch, d) teacher embeddings of the same
    sentences (or their translations); neither needs to be normalised. Returns a scalar.
    """
    loss = cosine_distillation_loss(student, teacher)
    if contrastive_weight > 0 and student.shape[0] > 1:
        student_unit, teacher_unit = F.normalize(student, dim=-1), F.normalize(teacher.to(student.dtype), dim=-1)
        logits = student_unit @ teacher_unit.T / temperature
        targets = torch.arange(student.shape[0], device=student.device)
        loss = loss + contrastive_weight * F.cross_entropy(logits, targets)
    return loss


class DistillationLoss(nn.Module):
    """``(model, batch) -> (loss_weight * loss, {"loss_<task>": loss})``: the MLM cross-entropy for ``mask`` batches
    and :func:`distillation_term` for ``distil`` and ``self`` batches, multiplied by the batch's ``loss_weight`` (1
    when it has none). The per-task value is the unweighted loss, as fairseq logs it, so that the MLM loss reads as a
    cross-entropy (against ln of the vocabulary size).

    Args:
        contrastive_weight: weight of the optional in-batch contrastive term (0: the paper's loss).
        temperature: softmax temperature of that term.
    """

    citation = """@inproceedings{heffernan-etal-2022-bitext,
  title = "Bitext Mining Using Distilled Sentence Representations for Low-Resource Languages",
  author = "Heffernan, Kevin and {\\c{C}}elebi, Onur and Schwenk, Holger",
  booktitle = "Findings of the Association for Computational Linguistics: EMNLP 2022",
  year = "2022",
  pages = "2101--2112",
}"""

    def __init__(self, contrastive_weight: float = 0.0, temperature: float = 0.05) -> None:
        super().__init__()
        if contrastive_weight < 0:
            raise UsageError(f"contrastive_weight must be non-negative, got {contrastive_weight}")
        if temperature <= 0:
            raise UsageError(f"temperature must be positive, got {temperature}")
        self.contrastive_weight, self.temperature = contrastive_weight, temperature

    def batch_loss(self, model: nn.Module, batch: Mapping[str, Any]) -> torch.Tensor:
        """The unweighted loss of one batch: MLM cross-entropy for ``mask`` batches, the distillation term otherwise."""
        if batch["task"] == "mask":
            output = model(
                input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], labels=batch["mlm_labels"]
            )
            return output.loss
        student = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).sentence_embedding
        teacher = batch["teacher_embeddings"].to(student.device)
        return distillation_term(student, teacher, self.contrastive_weight, self.temperature)

    def forward(self, model: nn.Module, batch: Mapping[str, Any]) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        loss = self.batch_loss(model, batch)
        return float(batch.get("loss_weight", 1.0)) * loss, {f"loss_{batch['task']}": loss.detach()}
