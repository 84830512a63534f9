"""OneAligner over corpora: text-level scoring and retrieval, and the two-stage search for large candidate sets.

The model (``bitext_hf.modeling.onealigner``) is what ships to the hub and knows nothing of text files, tokenizers or
FAISS; these functions take ``(model, tokenizer, texts, ...)`` and use only its public methods:

>>> from bitext_hf.mining import onealigner
>>> matrix = onealigner.similarity_matrix(model, tokenizer, sources, targets)  # (n_source, n_target), blocks of 256
>>> scores, indices = onealigner.two_stage_retrieve(model, tokenizer, sources, targets, top_k=64)

``scoring``: tokenize, encode, block-wise similarity matrix, top-1 retrieval, pair scores, candidate re-ranking,
block normalization of a matrix and retrieval accuracy (what the training recipe reports). ``two_stage``: the
first stages (token-level FAISS neighbours, or mean-pooled kNN) in front of the re-ranking.
"""

from __future__ import annotations

from bitext_hf.mining.onealigner.scoring import (
    OneAlignerDataError,
    OneAlignerUsageError,
    encode,
    encode_tokens,
    fit_idf,
    normalize_blocks,
    pad_token_ids,
    rerank,
    rerank_encoded,
    retrieval_accuracy,
    retrieve,
    score_pairs,
    similarity_matrix,
    tokenize,
)
from bitext_hf.mining.onealigner.two_stage import FIRST_STAGES, token_candidates, two_stage_retrieve

__all__ = [
    "FIRST_STAGES",
    "OneAlignerDataError",
    "OneAlignerUsageError",
    "encode",
    "encode_tokens",
    "fit_idf",
    "normalize_blocks",
    "pad_token_ids",
    "rerank",
    "rerank_encoded",
    "retrieval_accuracy",
    "retrieve",
    "score_pairs",
    "similarity_matrix",
    "token_candidates",
    "tokenize",
    "two_stage_retrieve",
]
