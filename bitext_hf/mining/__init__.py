"""Margin-based bitext mining over embedding arrays: plain functions, exact search in one pass in both directions, or
FAISS indexes chosen by corpus size (``index="auto"``, :mod:`bitext_hf.mining.index`).

>>> from bitext_hf.mining import mine
>>> for src_index, tgt_index, score in mine(src_embeddings, tgt_embeddings, k=4, margin="ratio", mode="max"):
...     ...
"""

from __future__ import annotations

import numpy as np

from bitext_hf.errors import DataValidationError
from bitext_hf.mining.documents import mine_documents
from bitext_hf.mining.index import (
    check_index,
    check_recall,
    choose_index,
    recall_at_k,
    search_neighbours,
    search_neighbours_unchecked,
)
from bitext_hf.mining.knn import (
    MAX_K,
    BidirectionalKNN,
    bidirectional_knn,
    check_embeddings,
    check_k,
    check_pair,
    ivf_index,
    knn_search,
)
from bitext_hf.mining.margin import MARGINS, apply_margin, neighbourhood_means
from bitext_hf.mining.output import write_pairs
from bitext_hf.mining.pipeline import MiningConfig, MiningResult, run_mining
from bitext_hf.mining.retrieval import DEFAULT_MODE, MODES, MinedPairs, candidate_scores, check_settings, retrieve
from bitext_hf.mining.scoring import ScoreConfig, ScoringResult, run_scoring
from bitext_hf.mining.voting import mine_with_voting, vote

__all__ = [
    "DEFAULT_MODE",
    "MARGINS",
    "MAX_K",
    "MODES",
    "BidirectionalKNN",
    "MinedPairs",
    "MiningConfig",
    "MiningResult",
    "ScoreConfig",
    "ScoringResult",
    "apply_margin",
    "bidirectional_knn",
    "candidate_scores",
    "check_embeddings",
    "check_index",
    "check_k",
    "check_pair",
    "check_recall",
    "check_settings",
    "choose_index",
    "ivf_index",
    "knn_search",
    "mine",
    "mine_documents",
    "mine_with_voting",
    "neighbourhood_means",
    "recall_at_k",
    "retrieve",
    "run_mining",
    "run_scoring",
    "score_pairs",
    "search_neighbours",
    "search_neighbours_unchecked",
    "vote",
    "write_pairs",
]


def mine(
    src_embeddings: np.ndarray,
    tgt_embeddings: np.ndarray,
    *,
    k: int = 4,
    margin: str = "ratio",
    mode: str = DEFAULT_MODE,
    threshold: float | None = None,
    index: str = "exact",
    nprobe: int | None = None,
    device: str | None = None,
    show_progress: bool = False,
) -> MinedPairs:
    """Mine parallel sentence pairs from two embedding matrices (same dimension; rows are L2-normalized first, see
    :func:`check_embeddings`).

    Args:
        k (int, defaults to 4): neighbourhood size for the margin, capped at the corpus sizes, at most MAX_K.
        margin (str, defaults to "ratio"): "ratio", "distance" or "absolute" (plain cosine).
        mode (str, defaults to "max"): "forward", "backward", "intersect", "union" or "max".
        threshold (float, optional): minimum score of a kept pair, in every mode.
        index (str, defaults to "exact"): "exact" (one pass over the similarity matrix, the reference), "auto" (exact
            for small corpora, then IVF-Flat, then OPQ/IVF/PQ: :func:`choose_index`) or a FAISS factory string such
            as "IVF1024,Flat"; see :mod:`bitext_hf.mining.index` and :func:`check_recall` for what it costs in recall.
        nprobe (int, optional): inverted lists a query scans with an IVF index (more: slower, closer to exact).
        device: torch device for the similarity products (CUDA when available); "cpu" also keeps FAISS on the CPU.

    Returns:
        MinedPairs sorted by decreasing score, iterable as ``(src_index, tgt_index, score)``.

    Raises:
        UsageError: k out of range (:func:`check_k`), an unknown margin or mode, a threshold that is not finite
            (:func:`check_settings`), an index that cannot work (:func:`check_index`); DataValidationError: unusable
            embeddings.
    """
    check_settings(margin, mode, threshold)
    src, tgt = check_pair(src_embeddings, tgt_embeddings, "source embeddings", "target embeddings")
    check_k(k, src.shape[0], tgt.shape[0])
    knn = search_neighbours_unchecked(
        src, tgt, k, index=index, nprobe=nprobe, device=device, show_progress=show_progress
    )
    return retrieve(knn, margin=margin, mode=mode, threshold=threshold)


def score_pairs(
    src_embeddings: np.ndarray,
    tgt_embeddings: np.ndarray,
    *,
    k: int = 4,
    margin: str = "ratio",
    index: str = "exact",
    nprobe: int | None = None,
    device: str | None = None,
    show_progress: bool = False,
) -> np.ndarray:
    """Margin scores of given pairs (row i of the source with row i of the target), e.g. to filter an existing
    parallel corpus. Neighbourhoods are taken over the whole corpus on both sides, searched as ``index`` and
    ``nprobe`` say (see :func:`mine`)."""
    check_settings(margin, DEFAULT_MODE, None)
    src, tgt = check_pair(src_embeddings, tgt_embeddings, "source embeddings", "target embeddings")
    if src.shape[0] != tgt.shape[0]:
        raise DataValidationError(
            f"score_pairs needs aligned rows: {src.shape[0]} source vs {tgt.shape[0]} target embeddings"
        )
    check_k(k, src.shape[0], tgt.shape[0])
    knn = search_neighbours_unchecked(
        src, tgt, k, index=index, nprobe=nprobe, device=device, show_progress=show_progress
    )
    cosine = np.einsum("ij,ij->i", src, tgt)
    return apply_margin(cosine, neighbourhood_means(knn.forward_sims), neighbourhood_means(knn.backward_sims), margin)
