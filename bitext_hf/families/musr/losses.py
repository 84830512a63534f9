"""MuSR's training objective: label-smoothed cross-entropy, plus CrossConST in stage 2.

CrossConST (Gao et al., 2023; MuSR paper, section 2.2, equations 3-4): for a pair (x, y) with y the English target,

    loss = CE(p(.|x), y) + alpha * KL(p(.|x) || p(.|y)),

where p(.|y) is the same model run with y as the source: y is encoded, and the decoder is run again on the same target
prefix from y's sentence embedding. Direction and gradients: the equations did not survive the text extraction of
the paper in shared/papers; its text, the CrossConST paper it cites (KL(f(x, theta) || f(y, theta)), one shared
theta, no stop-gradient) and DESIGN.md agree on KL(p(.|x) || p(.|y)) with neither side detached, so the gradient
reaches both branches (the English branch is what pulls English into the space of the sources). Both branches run
with dropout, in one forward pass over a batch of 2B sources.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from bitext_hf.modeling.musr.modeling_musr import label_smoothed_cross_entropy
from bitext_hf.training.distributed import global_share

__all__ = ["Branches", "CrossConSTLoss", "crossconst_kl", "split_target"]


def split_target(target_ids: torch.Tensor, target_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``<s> y </s>`` ids (right-padded) -> (decoder inputs ``<s> y``, labels ``y </s>`` with -100 on padding)."""
    labels = target_ids[:, 1:].masked_fill(target_mask[:, 1:] == 0, -100)
    return target_ids[:, :-1], labels


def crossconst_kl(logits_x: torch.Tensor, logits_y: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean over the target tokens where ``mask`` is true of KL(p(.|x) || p(.|y)), summed over the vocabulary."""
    log_p_x = logits_x.float().log_softmax(dim=-1)
    log_p_y = logits_y.float().log_softmax(dim=-1)
    # kl_div(input, target) = target * (log target - input): with target p(.|x) this is KL(p(.|x) || p(.|y)).
    per_token = F.kl_div(log_p_y, log_p_x, log_target=True, reduction="none").sum(dim=-1)
    return per_token[mask.bool()].mean()


def _pad_to(ids: torch.Tensor, mask: torch.Tensor, width: int, pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    extra = width - ids.shape[1]
    return F.pad(ids, (0, extra), value=pad_id), F.pad(mask, (0, extra), value=0)


@dataclass
class Branches:
    """What one CrossConST forward pass produced (``logits_y`` and the second half of ``sentence_embedding`` only
    when the English branch ran)."""

    logits_x: torch.Tensor
    logits_y: torch.Tensor | None
    labels: torch.Tensor
    sentence_embedding: torch.Tensor  # (B, d), or (2B, d): rows of x, then rows of y


class CrossConSTLoss(nn.Module):
    """``loss_fn(model, batch) -> (loss, {"ce", "kl"})`` for ``BitextTrainer``, the shape every family's loss has
    here (the model passed at each call: under DDP the Trainer passes the wrapped one), with the paper's ``citation``.

    Both terms are means over the batch's target tokens. In a distributed job every target token of the global batch
    weighs the same, as in one process given the whole batch: DDP averages the ranks' gradients, so a rank's loss is
    scaled by its share of the global batch's target tokens (``global_share``). The logged parts stay the rank's own.

    Inputs (``bitext_hf.data.collators.PairCollator``): ``src_input_ids`` / ``src_attention_mask`` (any language,
    ``<s> x </s>``) and ``tgt_input_ids`` / ``tgt_attention_mask`` (English, ``<s> y </s>``). ``alpha = 0`` is stage 1
    (plain label-smoothed cross-entropy; the English branch is not run).

    Args:
        alpha: weight of the KL term.
        label_smoothing: epsilon of the cross-entropy; ``None`` takes the model config's.
    """

    citation = """@inproceedings{gao-etal-2023-learning,
  title = "Learning Multilingual Sentence Representations with Cross-lingual Consistency Regularization",
  author = "Gao, Pengzhi and Zhang, Liwen and He, Zhongjun and Wu, Hua and Wang, Haifeng",
  booktitle = "Proceedings of the 2023 Conference on Empirical Methods in Natural Language Processing: Industry Track",
  month = dec,
  year = "2023",
  address = "Singapore",
  publisher = "Association for Computational Linguistics",
  pages = "243--262",
}"""

    def __init__(self, alpha: float = 0.0, label_smoothing: float | None = None) -> None:
        super().__init__()
        if alpha < 0:
            raise ValueError(f"alpha must be >= 0, got {alpha}")
        self.alpha, self.label_smoothing = float(alpha), label_smoothing

    def branches(self, model: nn.Module, batch: Mapping[str, Any]) -> Branches:
        """Run the model on x (and on y when alpha > 0) with the same target prefix, through ``forward`` (so that a
        DDP-wrapped model synchronises its gradients)."""
        config = getattr(model, "module", model).config
        decoder_ids, labels = split_target(batch["tgt_input_ids"], batch["tgt_attention_mask"])
        decoder_mask = batch["tgt_attention_mask"][:, :-1]
        source_ids, source_mask = batch["src_input_ids"], batch["src_attention_mask"]
        rows = source_ids.shape[0]
        if self.alpha:
            width = max(source_ids.shape[1], batch["tgt_input_ids"].shape[1])
            source_ids, source_mask = (
                torch.cat(pair)
                for pair in zip(
                    _pad_to(source_ids, source_mask, width, config.pad_token_id),
                    _pad_to(batch["tgt_input_ids"], batch["tgt_attention_mask"], width, config.pad_token_id),
                )
            )
            decoder_ids, decoder_mask = decoder_ids.repeat(2, 1), decoder_mask.repeat(2, 1)
        output = model(
            input_ids=source_ids,
            attention_mask=source_mask,
            decoder_input_ids=decoder_ids,
            decoder_attention_mask=decoder_mask,
            return_dict=True,
        )
        logits = output.logits
        return Branches(
            logits_x=logits[:rows],
            logits_y=logits[rows:] if self.alpha else None,
            labels=labels,
            sentence_embedding=output.sentence_embedding,
        )

    def forward(self, model: nn.Module, batch: Mapping[str, Any]) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        config = getattr(model, "module", model).config
        epsilon = config.label_smoothing if self.label_smoothing is None else self.label_smoothing
        branches = self.branches(model, batch)
        cross_entropy = label_smoothed_cross_entropy(branches.logits_x, branches.labels, epsilon)
        parts = {"ce": cross_entropy.detach()}
        loss = cross_entropy
        if branches.logits_y is not None:
            kl = crossconst_kl(branches.logits_x, branches.logits_y, branches.labels != -100)
            loss, parts["kl"] = cross_entropy + self.alpha * kl, kl.detach()
        if model.training:
            share = global_share(int((branches.labels != -100).sum()), loss.device)
            if share != 1.0:
                loss = loss * share
        return loss, parts
