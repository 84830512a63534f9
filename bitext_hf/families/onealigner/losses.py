"""OneAligner's training loss, in the shape every family's loss has here: an ``nn.Module`` whose
``forward(model, inputs)`` returns ``(loss, logged parts)`` (``BitextTrainer(loss_fn=...)``), with the paper's
``citation``.

The model is passed at each call rather than held, as sentence-transformers' losses hold theirs: under DDP the
Trainer calls the loss with the wrapped model, whose ``forward`` must run for the ranks' gradients to be reduced.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

from bitext_hf.modeling.onealigner.modeling_onealigner import OneAlignerFeatures
from bitext_hf.training.distributed import gather_with_grad, world_size
from bitext_hf.training.peft import base_model

__all__ = ["OneAlignerLoss"]


class OneAlignerLoss(nn.Module):
    """The paper's contrastive loss on a ``PairCollator`` batch (row i of each side aligned): cross-entropy over the
    normalized BERTScore matrix divided by the temperature, every other pair of the batch a negative (the model's
    own ``forward(..., return_loss=True)``), and the batch's source-to-target top-1 accuracy on the normalized
    training scores as a logged part (a cheap sign of learning).

    In a distributed job (``gather_across_devices``, in training) the negatives and the in-batch normalization are
    those of the global batch, as in one process given the whole batch: each rank encodes its own batch through the
    (DDP-wrapped) model, gathers every rank's token features with their gradients, and scores the global batch.
    Every rank computes the same loss, so DDP's average of the ranks' gradients is that loss's gradient
    (``training.distributed.gather_with_grad``).

    Args:
        gather_across_devices: score the global batch under data parallelism (else each rank's own batch).
    """

    citation = """@inproceedings{niu-etal-2022-onealigner,
  title = "{O}ne{A}ligner: Zero-shot Cross-lingual Transfer with One Rich-Resource Language Pair for Low-Resource Sentence Retrieval",
  author = "Niu, Tong and Hashimoto, Kazuma and Zhou, Yingbo and Xiong, Caiming",
  booktitle = "Findings of the Association for Computational Linguistics: ACL 2022",
  year = "2022",
  pages = "2869--2882",
}"""

    def __init__(self, gather_across_devices: bool = True) -> None:
        super().__init__()
        self.gather_across_devices = gather_across_devices

    def forward(self, model: nn.Module, inputs: Mapping[str, torch.Tensor]) -> tuple[torch.Tensor, dict[str, Any]]:
        gather = self.gather_across_devices and model.training and world_size() > 1
        output = model(
            input_ids=inputs["src_input_ids"],
            attention_mask=inputs["src_attention_mask"],
            target_input_ids=inputs["tgt_input_ids"],
            target_attention_mask=inputs["tgt_attention_mask"],
            return_loss=not gather,
        )
        loss, scores = output.loss, output.scores
        if gather:
            core = base_model(model)
            source, target = (
                _gathered(
                    core.features_from_states(states, inputs[f"{side}_input_ids"], inputs[f"{side}_attention_mask"])
                )
                for side, states in (("src", output.last_hidden_state), ("tgt", output.target_last_hidden_state))
            )
            _, scores, loss = core.score_batch(source, target, return_loss=True)
        labels = torch.arange(scores.shape[0], device=scores.device)
        # A detached tensor, not .item(): the Trainer converts logged parts once per logging window, not every step.
        accuracy = (scores.argmax(dim=1) == labels).float().mean().detach()
        return loss, {"train_batch_accuracy": accuracy}


def _gathered(features: OneAlignerFeatures) -> OneAlignerFeatures:
    """Every rank's features in rank order; padded tokens get zero vectors and zero weights, which BERTScore leaves
    out as it does a batch's own padding."""
    return OneAlignerFeatures(*(gather_with_grad(part) for part in features))
