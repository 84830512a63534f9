"""The ContrastiveAlignedEncoder's training loss, in the shape every family's loss has here: an ``nn.Module`` whose
``forward(model, inputs)`` returns ``(loss, logged parts)`` (``BitextTrainer(loss_fn=...)``), with the paper's
``citation``. The model computes its own objective; this module weighs it for data parallelism.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

from bitext_hf.training.distributed import gather_with_grad, global_share, world_size
from bitext_hf.training.peft import base_model

__all__ = ["AlignmentLoss"]


class AlignmentLoss(nn.Module):
    """The model's loss (its objective's alignment term plus the weighted parameter regularizer) and its parts
    (alignment term, regularizer, links per batch) for the Trainer's logs.

    In a distributed job every link of the global batch weighs the same, as in one process given the whole batch:

    * ``l2`` and ``linear`` are means over the micro-batch's links, and DDP averages the ranks' gradients, so a rank's
      term is scaled by its share of the global batch's links (:func:`~bitext_hf.training.distributed.global_share`;
      so are ``weak`` and ``strong`` without ``gather_across_devices``, over each rank's own negatives);
    * ``weak`` and ``strong`` take every other link of the batch as a negative: with ``gather_across_devices`` each
      rank gathers every rank's linked token states with their gradients and scores the global batch's links, the
      same loss on every rank, whose gradient DDP's average gives back
      (:func:`~bitext_hf.training.distributed.gather_with_grad`). The rank's own term stays in the graph with a
      zero gradient (it is added and taken away), so the parameters get their gradients in the same places.

    The logged alignment term is then the global one; the other parts stay the rank's own.

    Args:
        gather_across_devices: score the global batch's links under data parallelism (``weak``, ``strong``).
    """

    citation = """@inproceedings{wu-dredze-2020-explicit,
  title = "Do Explicit Alignments Robustly Improve Multilingual Encoders?",
  author = "Wu, Shijie and Dredze, Mark",
  booktitle = "Proceedings of the 2020 Conference on Empirical Methods in Natural Language Processing (EMNLP)",
  year = "2020",
  pages = "4471--4482",
}"""

    def __init__(self, gather_across_devices: bool = True) -> None:
        super().__init__()
        self.gather_across_devices = gather_across_devices

    def forward(self, model: nn.Module, inputs: Mapping[str, torch.Tensor]) -> tuple[torch.Tensor, dict[str, Any]]:
        output = model(**inputs)
        links = inputs["alignments"].shape[0]
        parts: dict[str, Any] = {"alignment_loss": output.alignment_loss.detach(), "links": links}
        if output.regularization_loss is not None:
            parts["regularization_loss"] = output.regularization_loss.detach()
        loss = output.loss
        if not model.training or world_size() == 1:
            return loss, parts
        core = base_model(model)
        if self.gather_across_devices and core.config.objective in ("weak", "strong"):
            examples, source_positions, target_positions = inputs["alignments"].unbind(1)
            source = gather_with_grad(output.last_hidden_state[examples, source_positions])
            target = gather_with_grad(output.target_last_hidden_state[examples, target_positions])
            if source.shape[0]:  # no rank has a link: the model's own zero term stands
                term = core.contrastive_link_loss(source, target)
                loss = loss - output.alignment_loss + term
                parts["alignment_loss"] = term.detach()
            return loss, parts
        share = global_share(links, inputs["alignments"].device)  # every rank calls it at the same step
        if share != 1.0:
            loss = loss + output.alignment_loss * (share - 1.0)
        return loss, parts
