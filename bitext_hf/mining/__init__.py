"""Margin-based bitext mining over embedding arrays: plain functions, exact search in one pass in both directions, or
FAISS indexes chosen by corpus size (``index="auto"``, :mod:`bitext_hf.mining.index`).

>>> from bitext_hf.mining import mine
>>> for src_index, tgt_index, score in mine(src_embeddings, tgt_embeddings, k=4, margin="ratio", mode="max"):
...     ...

The names below are imported on first access (PEP 562), as transformers' packages do: importing a light submodule
(``bitext_hf.jobs.mine``, which ``--help`` reads) then costs no torch or FAISS import.
"""

from __future__ import annotations

from bitext_hf.lazy_imports import lazy_exports

# Each public name and the submodule that defines it.
_SUBMODULE_OF = {
    "apply_margin": "margin",
    "bidirectional_knn": "knn",
    "BidirectionalKNN": "knn",
    "candidate_scores": "retrieval",
    "check_embeddings": "bitext_hf.data.embeddings",
    "check_index": "index",
    "check_k": "knn",
    "check_pair": "knn",
    "check_recall": "index",
    "check_settings": "retrieval",
    "choose_index": "index",
    "DEFAULT_MODE": "retrieval",
    "ivf_index": "knn",
    "knn_search": "knn",
    "MARGINS": "margin",
    "MAX_K": "knn",
    "mine": "arrays",
    "mine_documents": "documents",
    "mine_with_voting": "voting",
    "MinedPairs": "retrieval",
    "MODES": "retrieval",
    "neighbourhood_means": "margin",
    "recall_at_k": "index",
    "retrieve": "retrieval",
    "score_pairs": "arrays",
    "search_neighbours": "index",
    "search_neighbours_unchecked": "index",
    "vote": "voting",
    "write_pairs": "bitext_hf.data.pair_files",
}

__all__ = sorted(_SUBMODULE_OF)


__getattr__, __dir__ = lazy_exports(__name__, _SUBMODULE_OF, globals())
