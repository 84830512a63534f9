"""Document-level mining: the same margin mining, inside each aligned pair of documents.

Comparable corpora often come as aligned documents (two language versions of one web page or article). Mining inside
each document pair is much cheaper than global mining and keeps the neighbourhoods local; k is capped per document.
"""

from __future__ import annotations

import logging
from collections.abc import Hashable, Sequence

import numpy as np

from bitext_hf.mining.knn import bidirectional_knn, check_embeddings
from bitext_hf.mining.retrieval import MinedPairs, retrieve

__all__ = ["mine_documents"]

logger = logging.getLogger(__name__)


def _group_rows(doc_ids: Sequence[Hashable], name: str, n_rows: int) -> dict[Hashable, np.ndarray]:
    if len(doc_ids) != n_rows:
        raise ValueError(f"{name}: {len(doc_ids)} document ids for {n_rows} embeddings; give one id per sentence")
    groups: dict[Hashable, list[int]] = {}
    for row, doc in enumerate(doc_ids):
        groups.setdefault(doc, []).append(row)
    return {doc: np.asarray(rows, dtype=np.int64) for doc, rows in groups.items()}


def mine_documents(
    src_embeddings: np.ndarray,
    tgt_embeddings: np.ndarray,
    src_doc_ids: Sequence[Hashable],
    tgt_doc_ids: Sequence[Hashable],
    *,
    k: int = 4,
    margin: str = "ratio",
    mode: str = "intersect",
    threshold: float | None = None,
    device: str | None = None,
) -> MinedPairs:
    """Mine pairs inside each document present on both sides; indices in the result are global rows.

    Args:
        src_doc_ids / tgt_doc_ids: one document id per embedding row; documents are matched by equal ids.
        mode (str, defaults to "intersect"): as in :func:`bitext_hf.mining.mine`; the margin-mining-with-voting
            paper's document-level Algorithm 1 uses intersect (or union).
    """
    src = check_embeddings(src_embeddings, "source embeddings")
    tgt = check_embeddings(tgt_embeddings, "target embeddings")
    src_groups = _group_rows(src_doc_ids, "source document ids", src.shape[0])
    tgt_groups = _group_rows(tgt_doc_ids, "target document ids", tgt.shape[0])
    shared = [doc for doc in src_groups if doc in tgt_groups]
    unmatched = len(src_groups) + len(tgt_groups) - 2 * len(shared)
    if unmatched:
        logger.warning("%d document(s) have no counterpart on the other side and are skipped", unmatched)
    parts = []
    for doc in shared:
        src_rows, tgt_rows = src_groups[doc], tgt_groups[doc]
        knn = bidirectional_knn(src[src_rows], tgt[tgt_rows], k, device=device)
        pairs = retrieve(knn, margin=margin, mode=mode, threshold=threshold)
        parts.append(pairs.offset(src_rows, tgt_rows))
    return MinedPairs.concatenate(parts).sorted()
