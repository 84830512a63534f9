"""Two-stage OneAligner retrieval for large candidate sets: mean-pooled kNN first, BERTScore re-ranking second.

The full BERTScore matrix costs n_source x n_target token-level comparisons. Here the mean-pooled layer-L vectors
(the model's sentence-transformers embedding) find the top-K candidates of every source with
:func:`bitext_hf.mining.knn_search` (exact inner product), and BERTScore with in-batch normalization re-ranks only
those (:meth:`OneAlignerModel.rerank`). Not shipped as remote code: it depends on :mod:`bitext_hf.mining`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from bitext_hf.mining import knn_search
from bitext_hf.modeling.onealigner.modeling_onealigner import OneAlignerInputError, OneAlignerModel

__all__ = ["two_stage_retrieve"]


def two_stage_retrieve(
    model: OneAlignerModel,
    source_sentences: Sequence[str],
    target_sentences: Sequence[str],
    *,
    top_k: int = 16,
    tokenizer: Any = None,
    batch_size: int | None = None,
    normalize: bool | None = None,
    normalization_sample: int | None = None,
    knn_backend: str = "faiss",
    seed: int = 0,
) -> tuple[np.ndarray, np.ndarray]:
    """Rank targets for every source: kNN over mean-pooled vectors, then BERTScore on the top_k only.

    Args:
        normalization_sample: sentences of the other side against which each sentence's normalization mean is
            estimated (default: ``config.eval_batch_size``, the paper's evaluation batch); drawn with ``seed``.
        knn_backend: ``"faiss"`` or ``"torch"`` (see :func:`bitext_hf.mining.knn_search`).

    Returns:
        `(scores, indices)`: float32 and int64 arrays `(n_source, min(top_k, n_target))`, best first; column 0 is
        the top-1 retrieval.
    """
    if top_k < 1:
        raise OneAlignerInputError(f"top_k must be >= 1, got {top_k}.")
    if not len(source_sentences) or not len(target_sentences):
        raise OneAlignerInputError("two_stage_retrieve needs at least one source and one target sentence.")
    batch_size = batch_size or model.config.eval_batch_size
    # Each sentence is encoded once: its pooled vector feeds the kNN, its token vectors the re-ranking.
    source = model._encode_tokens(source_sentences, tokenizer, batch_size)
    target = model._encode_tokens(target_sentences, tokenizer, batch_size)
    source_vectors = _pooled(source)
    target_vectors = _pooled(target)
    _, candidates = knn_search(source_vectors, target_vectors, top_k, backend=knn_backend)
    scores, indices = model._rerank_encoded(
        source,
        target,
        torch.from_numpy(np.asarray(candidates, dtype=np.int64)),
        batch_size,
        normalize,
        normalization_sample,
        seed,
    )
    return scores.numpy().astype(np.float32), indices.numpy().astype(np.int64)


def _pooled(encoded: Sequence[Any]) -> np.ndarray:
    """L2-normalized mean-pooled vectors (what ``OneAlignerModel.encode`` returns) as contiguous float32."""
    vectors = torch.nn.functional.normalize(torch.stack([item[2] for item in encoded]), dim=-1)
    return np.ascontiguousarray(vectors.cpu().numpy(), dtype=np.float32)
