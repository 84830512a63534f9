"""Retrieval metrics of an aligned encoder: word-level (intrinsic, over aligned word pairs) and sentence-level xsim.

* :func:`word_retrieval_accuracy`: every aligned word pair of a corpus becomes one row on each side (the word's
  first-subword vector in context); top-1 cosine retrieval among all those rows, both directions, through
  :func:`bitext_hf.evaluation.metrics.bitext_accuracy`. The intrinsic measure of what the alignment objectives
  optimize.
* :func:`sentence_retrieval`: mean-pooled, L2-normalized sentence embeddings; LASER's xsim (ratio margin, k = 4)
  through :func:`bitext_hf.evaluation.metrics.xsim`, and top-1 accuracy in both directions.

Both take a plain transformers encoder and, optionally, a `(d, d)` map applied to the target side (the ``linear``
objective's W: mean pooling commutes with it).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from bitext_hf.data.words import first_subword_vectors
from bitext_hf.errors import DataValidationError
from bitext_hf.evaluation.metrics import bitext_accuracy, xsim

__all__ = ["sentence_retrieval", "word_retrieval_accuracy"]


def _apply_map(vectors: torch.Tensor, target_map: torch.Tensor | None) -> torch.Tensor:
    if target_map is None:
        return vectors
    return torch.nn.functional.normalize(vectors @ target_map.detach().float().cpu(), dim=-1)


def word_retrieval_accuracy(
    encoder: torch.nn.Module,
    tokenizer: Any,
    source_words: Sequence[Sequence[str]],
    target_words: Sequence[Sequence[str]],
    word_links: Sequence[Sequence[tuple[int, int]]],
    *,
    target_map: torch.Tensor | None = None,
    layer: int | None = None,
    max_length: int = 96,
) -> dict[str, float]:
    """Top-1 retrieval accuracy among the corpus's aligned word pairs (fractions; ``accuracy`` is the mean of both
    directions), plus ``word_pairs``, how many pairs were compared.

    Raises:
        DataValidationError: no aligned word pair survives truncation.
    """
    sources = first_subword_vectors(encoder, tokenizer, source_words, layer=layer, max_length=max_length)
    targets = first_subword_vectors(encoder, tokenizer, target_words, layer=layer, max_length=max_length)
    rows_source, rows_target = [], []
    for source, target, links in zip(sources, targets, word_links):
        for i, j in links:
            if source[i].any() and target[j].any():  # zero rows: words cut off by max_length
                rows_source.append(source[i])
                rows_target.append(target[j])
    if not rows_source:
        raise DataValidationError("word retrieval: no aligned word pair to evaluate (no links, or all truncated)")
    source_matrix = torch.stack(rows_source)
    target_matrix = _apply_map(torch.stack(rows_target), target_map)
    result = bitext_accuracy(source_matrix.numpy(), target_matrix.numpy())
    return {**result, "word_pairs": float(len(rows_source))}


def sentence_retrieval(
    encoder: torch.nn.Module,
    tokenizer: Any,
    sources: Sequence[str],
    targets: Sequence[str],
    *,
    target_map: torch.Tensor | None = None,
    max_length: int = 96,
    k: int = 4,
) -> dict[str, float]:
    """Sentence-level xsim (percent, source -> target) and top-1 accuracy (both directions) on aligned rows."""
    from bitext_hf.encoders import HFEncoder

    embed = HFEncoder(encoder, tokenizer=tokenizer, pooling="mean", max_length=max_length)
    source_matrix = embed.encode(list(sources))
    target_matrix = embed.encode(list(targets))
    if target_map is not None:
        target_matrix = _apply_map(torch.from_numpy(target_matrix), target_map).numpy()
    error = xsim(source_matrix, target_matrix, k=min(k, len(targets)), margin="ratio")
    accuracy = bitext_accuracy(np.ascontiguousarray(source_matrix), np.ascontiguousarray(target_matrix))
    return {"xsim": float(error["xsim"]), "sentence_accuracy": accuracy["accuracy"]}
