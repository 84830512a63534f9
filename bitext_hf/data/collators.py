"""One padding collator for translation pairs: ``PairCollator`` and the ``pad_sequences`` it is built on.

Written here rather than taken from ``transformers.DataCollatorWithPadding`` / ``tokenizer.pad``: those pad one
``input_ids`` field per example and need the tokenizer object, while a pair example carries two id lists
(``src_input_ids`` and ``tgt_input_ids``) of different lengths and a model's collator only knows its pad id. The
padding itself is ``torch.nn.utils.rnn.pad_sequence``; only the mask and the pairing are ours.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch
from torch.nn.utils.rnn import pad_sequence
from torch.utils.data import default_collate

__all__ = ["PairCollator", "pad_sequences"]


def pad_sequences(
    sequences: Sequence[Sequence[int] | torch.Tensor], pad_id: int, *, pad_to_multiple_of: int | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-pad token id sequences into ``(ids, attention_mask)``, both ``(batch, width)`` int64 tensors.

    ``width`` is the longest sequence, rounded up to ``pad_to_multiple_of`` when given (tensor-core friendly
    shapes); the mask is 1 on real tokens and 0 on padding.
    """
    if not len(sequences):
        raise ValueError("pad_sequences: no sequences to pad (an empty batch)")
    rows = [torch.as_tensor(ids, dtype=torch.long).reshape(-1) for ids in sequences]
    lengths = torch.tensor([len(row) for row in rows], dtype=torch.long)
    width = int(lengths.max())
    if pad_to_multiple_of:
        width = -(-width // pad_to_multiple_of) * pad_to_multiple_of
    ids = pad_sequence(rows, batch_first=True, padding_value=pad_id)
    if ids.shape[1] < width:
        ids = torch.nn.functional.pad(ids, (0, width - ids.shape[1]), value=pad_id)
    mask = (torch.arange(width).unsqueeze(0) < lengths.unsqueeze(1)).long()
    return ids, mask


class PairCollator:
    """Pads the source and target ids of pair examples into the inputs of a pair model.

    Each example is a mapping with ``src_input_ids`` and ``tgt_input_ids`` (lists or 1-D tensors of token ids); the
    batch holds ``src_input_ids``, ``src_attention_mask``, ``tgt_input_ids``, ``tgt_attention_mask`` (int64,
    right-padded with ``pad_token_id``). Any other key (labels, teacher embeddings...) is batched by torch's
    ``default_collate``.
    """

    def __init__(
        self, pad_token_id: int, *, pad_to_multiple_of: int | None = None, sides: Sequence[str] = ("src", "tgt")
    ) -> None:
        if pad_token_id is None:
            raise ValueError("PairCollator needs a pad_token_id (the tokenizer has no pad token)")
        self.pad_token_id = int(pad_token_id)
        self.pad_to_multiple_of = pad_to_multiple_of
        self.sides = tuple(sides)

    def __call__(self, examples: Sequence[Mapping[str, Any]]) -> dict[str, torch.Tensor]:
        if not examples:
            raise ValueError("PairCollator: an empty batch")
        batch: dict[str, Any] = {}
        padded = set()
        for side in self.sides:
            key = f"{side}_input_ids"
            missing = [index for index, example in enumerate(examples) if key not in example]
            if missing:
                raise KeyError(f"PairCollator: example {missing[0]} has no {key!r} (keys: {sorted(examples[0])})")
            batch[key], batch[f"{side}_attention_mask"] = pad_sequences(
                [example[key] for example in examples], self.pad_token_id, pad_to_multiple_of=self.pad_to_multiple_of
            )
            padded.update((key, f"{side}_attention_mask"))
        for key in examples[0]:
            if key not in padded:
                batch[key] = default_collate([example[key] for example in examples])
        return batch
