"""The pair classifier's training loss, in the shape every family's loss has here: an ``nn.Module`` whose
``forward(model, batch)`` returns ``(loss, logged parts)`` (``BitextTrainer(loss_fn=...)``), with the ``citation``
of the work it follows (bicleaner-ai: a classifier of translation pairs trained on synthetic negatives).

The light classifier's binary cross-entropy is the shipped model's own (``PairQualityClassifier.forward`` computes it
when given labels), so training and the checkpoint's loss are one function. The cross-encoder's is computed here on
the head's one logit: a transformers sequence-classification model with one label computes a regression loss (MSE),
and its multi-label setting a BCE whose labels must be shaped as the logits, which the padding collator does not give.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

__all__ = ["CrossEncoderLoss", "PairQualityLoss"]


_BICLEANER_AI = """@inproceedings{zaragoza-bernabeu-etal-2022-bicleaner,
  title = "Bicleaner {AI}: Bicleaner Goes Neural",
  author = "Zaragoza-Bernabeu, Jaume and Ram{\\'\\i}rez-S{\\'a}nchez, Gema and Ba{\\~n}{\\'o}n, Marta and Ortiz Rojas, Sergio",
  booktitle = "Proceedings of the Thirteenth Language Resources and Evaluation Conference",
  year = "2022",
  pages = "824--831",
}"""


class PairQualityLoss(nn.Module):
    """``(model, batch) -> (binary cross-entropy, {"loss_bce": it})`` over ``batch["features"]`` and
    ``batch["labels"]`` (1: a translation)."""

    citation = _BICLEANER_AI

    def forward(self, model: nn.Module, batch: Mapping[str, Any]) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        loss = model(features=batch["features"], labels=batch["labels"]).loss
        return loss, {"loss_bce": loss.detach()}


class CrossEncoderLoss(nn.Module):
    """``(model, batch) -> (binary cross-entropy, {"loss_bce": it})`` of a one-logit sequence-classification model
    over the tokenized pairs of ``batch`` and ``batch["labels"]`` (1: a translation)."""

    citation = _BICLEANER_AI

    def forward(self, model: nn.Module, batch: Mapping[str, Any]) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        inputs = {name: value for name, value in batch.items() if name != "labels"}
        logits = model(**inputs).logits[:, 0]
        loss = nn.functional.binary_cross_entropy_with_logits(logits.float(), batch["labels"].float())
        return loss, {"loss_bce": loss.detach()}
