"""Document-level mining: the same margin mining, inside each aligned pair of documents.

Comparable corpora often come as aligned documents (two language versions of one web page or article). Mining inside
each document pair is much cheaper than global mining and keeps the neighbourhoods local; k is capped per document.

De-duplication is per document: with ``src_keys`` / ``tgt_keys`` (e.g. the sentences' texts), rows of one document
with equal keys are mined once, at their first row in that document. A sentence repeated in two documents is mined in
both (global de-duplication would keep it in the first document only and lose its pair in the second).
"""

from __future__ import annotations

import logging
from collections.abc import Hashable, Sequence

import numpy as np

from bitext_hf.errors import DataValidationError, UsageError
from bitext_hf.mining.index import check_index, search_neighbours_unchecked
from bitext_hf.mining.knn import check_k, check_pair
from bitext_hf.mining.retrieval import DEFAULT_MODE, MinedPairs, check_settings, retrieve

__all__ = ["mine_documents"]

logger = logging.getLogger(__name__)


def _group_rows(
    doc_ids: Sequence[Hashable], keys: Sequence[Hashable] | None, name: str, n_rows: int
) -> dict[Hashable, np.ndarray]:
    """Rows of each document, in order; with ``keys``, only the first row of each key within the document."""
    if len(doc_ids) != n_rows:
        raise DataValidationError(
            f"{name}: {len(doc_ids)} document ids for {n_rows} embeddings; give one id per sentence"
        )
    if keys is not None and len(keys) != n_rows:
        raise DataValidationError(f"{name}: {len(keys)} keys for {n_rows} embeddings; give one key per sentence")
    groups: dict[Hashable, list[int]] = {}
    seen: set[tuple[Hashable, Hashable]] = set()
    for row, doc in enumerate(doc_ids):
        if keys is not None:
            if (doc, keys[row]) in seen:
                continue
            seen.add((doc, keys[row]))
        groups.setdefault(doc, []).append(row)
    return {doc: np.asarray(rows, dtype=np.int64) for doc, rows in groups.items()}


def _doc_id_array(doc: Hashable, n: int) -> np.ndarray:
    ids = np.asarray([doc] * n)
    if ids.ndim != 1:
        raise DataValidationError(f"document id {doc!r} is not a scalar; use strings or integers")
    return ids


def mine_documents(
    src_embeddings: np.ndarray,
    tgt_embeddings: np.ndarray,
    src_doc_ids: Sequence[Hashable],
    tgt_doc_ids: Sequence[Hashable],
    *,
    src_keys: Sequence[Hashable] | None = None,
    tgt_keys: Sequence[Hashable] | None = None,
    k: int = 4,
    margin: str = "ratio",
    mode: str = DEFAULT_MODE,
    threshold: float | None = None,
    index: str = "exact",
    nprobe: int | None = None,
    device: str | None = None,
) -> MinedPairs:
    """Mine pairs inside each document present on both sides; indices in the result are global rows.

    Args:
        src_doc_ids (sequence of str or int): one document id per source embedding row; documents are matched by
            equal ids.
        tgt_doc_ids (sequence of str or int): one document id per target embedding row.
        src_keys (sequence, optional): one key per source row (e.g. its text); inside a document, rows with equal
            keys are mined once and reported at their first row in that document. Without keys every row is mined.
        tgt_keys (sequence, optional): one key per target row, likewise.
        k (int, defaults to 4): neighbourhood size, capped at each document's size; see
            :func:`bitext_hf.mining.check_k`.
        mode (str, defaults to DEFAULT_MODE, "max"): as in :func:`bitext_hf.mining.mine`.
        index (str, defaults to "exact"): "exact", or "auto" (chosen per document pair: exact for all but very large
            documents; see :func:`bitext_hf.mining.choose_index`). A FAISS factory string is refused: one index per
            document would be trained on that document alone.
        nprobe (int, optional): IVF cells scanned per query when "auto" picks an index.

    Returns:
        MinedPairs with ``doc_ids`` (the document of each pair), sorted by decreasing score.

    Raises:
        UsageError: k out of range for the largest document pair, an unknown margin or mode, a threshold that is
            not finite; DataValidationError: unusable embeddings, or
            ids / keys whose count differs from the rows.
    """
    check_settings(margin, mode, threshold)
    if index not in ("exact", "auto"):
        raise UsageError(
            f"document-level mining takes index 'exact' or 'auto' (chosen per document), not {index!r}: an index "
            "per document would be trained on that document alone"
        )
    src, tgt = check_pair(src_embeddings, tgt_embeddings, "source embeddings", "target embeddings")
    check_index(index, src.shape[1], nprobe)
    src_groups = _group_rows(src_doc_ids, src_keys, "source document ids", src.shape[0])
    tgt_groups = _group_rows(tgt_doc_ids, tgt_keys, "target document ids", tgt.shape[0])
    shared = [doc for doc in src_groups if doc in tgt_groups]
    unmatched = len(src_groups) + len(tgt_groups) - 2 * len(shared)
    if unmatched:
        logger.warning("%d document(s) have no counterpart on the other side and are skipped", unmatched)
    if shared:
        # k is capped per document, so only the largest documents can exceed the bound: check before any mining.
        check_k(k, max(src_groups[d].size for d in shared), max(tgt_groups[d].size for d in shared))
    parts = []
    for doc in shared:
        src_rows, tgt_rows = src_groups[doc], tgt_groups[doc]
        knn = search_neighbours_unchecked(src[src_rows], tgt[tgt_rows], k, index=index, nprobe=nprobe, device=device)
        pairs = retrieve(knn, margin=margin, mode=mode, threshold=threshold).offset(src_rows, tgt_rows)
        pairs.doc_ids = _doc_id_array(doc, len(pairs))
        parts.append(pairs)
    if not parts:
        empty = MinedPairs.empty()
        empty.doc_ids = np.empty(0, dtype=np.str_)
        return empty
    return MinedPairs.concatenate(parts).sorted()
