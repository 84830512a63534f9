"""Masked language modelling inputs for the ``mask`` task: blocks of consecutive sentences (``pack_blocks``) and their
masking, through ``transformers.DataCollatorForLanguageModeling``.

The masking is the paper's (DESIGN.md: "15% of tokens to <mask>"), which is also what this package did by hand
before: every chosen token becomes ``<mask>``. It is *not* BERT's 80/10/10 split (80% ``<mask>``, 10% a random
token, 10% unchanged); the collator does the paper's variant with ``mask_replace_prob=1, random_replace_prob=0``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from transformers import DataCollatorForLanguageModeling

__all__ = [
    "MLM_BREAK_MODES",
    "MLM_CONTEXT_MARGIN",
    "SentenceMaskingCollator",
    "mlm_learning_check",
    "pack_blocks",
    "unigram_entropy",
]

# fairseq's --sample-break-mode values this package has: "complete" (blocks of whole consecutive sentences, fairseq's
# default and the laser_distillation task's) and "eos" (one sentence per example).
MLM_BREAK_MODES: tuple[str, ...] = ("complete", "eos")
# Nats by which the final MLM loss must end below the unigram entropy of the MLM text before the head counts as having
# learned context (experiments/README.md, LASER3: the verdict rule written before the paper's-protocol run).
MLM_CONTEXT_MARGIN = 0.5


def unigram_entropy(sequences: Sequence[Sequence[int]], ignored: Sequence[int] = ()) -> tuple[float, int]:
    """The entropy (nats) of the token frequencies of ``sequences``, ``ignored`` ids (never masked) left out, and the
    number of tokens counted: the MLM loss of a head that ignores the context and predicts every masked token by
    its frequency. ``(nan, 0)`` without tokens."""
    import numpy as np

    flat = [np.asarray(sequence, dtype=np.int64) for sequence in sequences if len(sequence)]
    ids = np.concatenate(flat) if flat else np.zeros(0, dtype=np.int64)
    ids = ids[~np.isin(ids, np.asarray(list(ignored), dtype=np.int64))]
    if not len(ids):
        return float("nan"), 0
    counts = np.bincount(ids).astype(np.float64)
    probabilities = counts[counts > 0] / counts.sum()
    return float(-(probabilities * np.log(probabilities)).sum()), len(ids)


def mlm_learning_check(entropy: float, log_history: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """Whether the MLM head of a run learned context: its last logged MLM loss (``loss_mask``) against ``entropy``,
    the unigram entropy of its MLM text. A loss that is not :data:`MLM_CONTEXT_MARGIN` below it means the head
    predicts tokens by their frequency only, so the encoder got no useful gradient from MLM; its batches then only
    took updates from distillation. ``None`` when the run logged no MLM loss."""
    losses = [float(entry["loss_mask"]) for entry in log_history if "loss_mask" in entry]
    if not losses:
        return None
    return {
        "final loss": round(losses[-1], 4),
        "unigram entropy": round(entropy, 4),
        "margin": MLM_CONTEXT_MARGIN,
        "learned context": losses[-1] <= entropy - MLM_CONTEXT_MARGIN,
    }


def pack_blocks(sequences: Sequence[Sequence[int]], capacity: int, separator: int) -> list[list[int]]:
    """Consecutive token sequences packed in order into blocks, as fairseq's ``TokenBlockDataset`` with
    ``break_mode="complete"`` packs monolingual text for MLM: each sequence is followed by ``separator`` (``</s>``),
    and a block takes whole sequences while it holds at most ``capacity`` tokens. A sequence longer than
    ``capacity`` is a block of its own (the caller truncates it). Every block ends with ``separator``.
    """
    if capacity < 1:
        raise ValueError(f"capacity must be positive, got {capacity}")
    blocks: list[list[int]] = []
    block: list[int] = []
    for sequence in sequences:
        if block and len(block) + len(sequence) + 1 > capacity:
            blocks.append(block)
            block = []
        block.extend([*sequence, separator])
    if block:
        blocks.append(block)
    return blocks


@dataclass
class SentenceMaskingCollator(DataCollatorForLanguageModeling):
    """``DataCollatorForLanguageModeling`` with the paper's masking (``mlm_probability`` of the real tokens, all to
    ``<mask>``), plus one rule the collator lacks: a sentence where no token was drawn gets one masked token (a
    random one among its real tokens), so every MLM example carries a prediction. Short sentences (UI strings of
    two or three subwords) would otherwise often carry none, and a small batch with no masked token at all would
    give a NaN loss.

    Use :meth:`torch_mask_tokens` on already padded ids with a ``special_tokens_mask`` (1 for BOS/EOS/padding); set
    ``generator`` (a ``torch.Generator``) before each call for masks that are a function of the step.
    """

    mask_replace_prob: float = 1.0
    random_replace_prob: float = 0.0

    def torch_mask_tokens(
        self, inputs: Any, special_tokens_mask: Any | None = None, offset_mapping: Any | None = None
    ) -> tuple[Any, Any]:
        if special_tokens_mask is None:
            raise ValueError("SentenceMaskingCollator needs the special_tokens_mask of the padded batch")
        inputs, labels = super().torch_mask_tokens(inputs, special_tokens_mask, offset_mapping)
        maskable = ~torch.as_tensor(special_tokens_mask, dtype=torch.bool)
        empty_rows = (labels == -100).all(dim=1) & maskable.any(dim=1)
        if empty_rows.any():
            # A uniform draw among the row's real tokens: random scores, non-maskable positions pushed above 1.
            scores = torch.rand(inputs.shape, generator=self.generator).masked_fill(~maskable, 2.0)
            rows = empty_rows.nonzero().squeeze(1)
            columns = scores[rows].argmin(dim=1)
            labels[rows, columns] = inputs[rows, columns]
            inputs[rows, columns] = self.tokenizer.mask_token_id
        return inputs, labels
