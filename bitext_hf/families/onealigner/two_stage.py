"""Two-stage OneAligner retrieval for large candidate sets: a cheap first stage proposes the top-K targets of every
source, BERTScore with in-batch normalization re-ranks only those (:func:`bitext_hf.families.onealigner.rerank`).

The full BERTScore matrix costs n_source x n_target token-level comparisons. Two first stages:

* ``"tokens"`` (default): every content token of every source searches its nearest target tokens (FAISS: exact
  for small inputs, an IVF index for large ones) and each target sentence collects, per source token, how far its
  best hit lies above that token's k-th neighbour. This approximates BERTScore's recall side (each source token's
  best match in the target) where it matters, and frequent tokens (punctuation, "the") whose neighbours are all
  alike contribute nothing, an idf effect for free. Candidate generation from per-token neighbours is the
  multi-vector retrieval idea of ColBERT (Khattab and Zaharia, 2020).
* ``"pooled"``: exact kNN over the mean-pooled layer-L vectors (the model's sentence-transformers embedding)
  through :func:`bitext_hf.mining.knn_search`. Cheaper, but a sentence vector loses the token matches BERTScore
  relies on: with the small encoder of ``benchmarks/bench_onealigner.py`` it misses the full matrix's top-1 far
  more often (see benchmarks/README.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from bitext_hf.families.onealigner.scoring import OneAlignerUsageError, encode_tokens, rerank_encoded
from bitext_hf.mining.knn import ivf_index, knn_search
from bitext_hf.modeling.onealigner.modeling_onealigner import OneAlignerFeatures, OneAlignerModel

__all__ = ["FIRST_STAGES", "token_candidates", "two_stage_retrieve"]

FIRST_STAGES = ("tokens", "pooled")
# Above this many query-token x target-token products the token search uses an IVF index instead of exact products.
EXACT_TOKEN_PRODUCTS = 2_000_000_000
# Query tokens searched at a time: bounds the (tokens x neighbours) hit arrays and their sort.
TOKEN_CHUNK = 65_536


def two_stage_retrieve(
    model: OneAlignerModel,
    tokenizer: Any,
    source_sentences: Sequence[str],
    target_sentences: Sequence[str],
    *,
    top_k: int = 64,
    first_stage: str = "tokens",
    token_neighbours: int = 64,
    nprobe: int = 2,
    batch_size: int | None = None,
    normalize: bool | None = None,
    normalization_sample: int | None = None,
    knn_backend: str = "faiss",
    seed: int = 0,
) -> tuple[np.ndarray, np.ndarray]:
    """Rank targets for every source: a first stage proposes ``top_k`` targets, BERTScore re-ranks those only.

    Args:
        tokenizer: the model's tokenizer (the model keeps none).
        top_k: candidates per source that the second stage scores (its cost is n_source x top_k BERTScore pairs).
        first_stage: ``"tokens"`` (token-level neighbours, see the module docstring) or ``"pooled"`` (mean-pooled
            sentence vectors).
        token_neighbours: target tokens retrieved per source token by the ``"tokens"`` stage.
        nprobe: IVF cells scanned per source token when the token search is too large for exact products.
        normalization_sample: sentences of the other side against which each sentence's normalization mean is
            estimated (default: ``config.eval_batch_size``, the paper's evaluation batch); drawn with ``seed``.
        knn_backend: ``"faiss"`` or ``"torch"`` (see :func:`bitext_hf.mining.knn_search`).

    Returns:
        `(scores, indices)`: float32 and int64 arrays `(n_source, min(top_k, n_target))`, best first; column 0 is
        the top-1 retrieval.
    """
    if top_k < 1:
        raise OneAlignerUsageError(f"top_k must be >= 1, got {top_k}.")
    if first_stage not in FIRST_STAGES:
        raise OneAlignerUsageError(f"first_stage must be one of {FIRST_STAGES}, got {first_stage!r}.")
    if not len(source_sentences) or not len(target_sentences):
        raise OneAlignerUsageError("two_stage_retrieve needs at least one source and one target sentence.")
    batch_size = batch_size or model.config.eval_batch_size
    # Each sentence is encoded once: its pooled vector feeds the kNN, its token vectors the re-ranking.
    source = encode_tokens(model, tokenizer, source_sentences, batch_size)
    target = encode_tokens(model, tokenizer, target_sentences, batch_size)
    if first_stage == "pooled" or model.config.similarity == "mean_pool":
        _, candidates = knn_search(_pooled(source), _pooled(target), top_k, backend=knn_backend)
    else:
        candidates = token_candidates(
            source, target, top_k, token_neighbours=token_neighbours, nprobe=nprobe, knn_backend=knn_backend, seed=seed
        )
    scores, indices = rerank_encoded(
        model,
        source,
        target,
        torch.from_numpy(np.asarray(candidates, dtype=np.int64)),
        batch_size=batch_size,
        normalize=normalize,
        normalization_sample=normalization_sample,
        seed=seed,
    )
    return scores.numpy().astype(np.float32), indices.numpy().astype(np.int64)


def _pooled(encoded: Sequence[OneAlignerFeatures]) -> np.ndarray:
    """L2-normalized mean-pooled vectors (what ``bitext_hf.families.onealigner.encode`` returns), contiguous
    float32."""
    vectors = torch.nn.functional.normalize(torch.stack([item.pooled for item in encoded]), dim=-1)
    return np.ascontiguousarray(vectors.cpu().numpy(), dtype=np.float32)


def token_candidates(
    source: Sequence[OneAlignerFeatures],
    target: Sequence[OneAlignerFeatures],
    top_k: int,
    *,
    token_neighbours: int = 64,
    nprobe: int = 2,
    knn_backend: str = "faiss",
    seed: int = 0,
) -> np.ndarray:
    """The ``top_k`` candidate targets of every source from token-level nearest neighbours.

    For a source token t with weight w_t (BERTScore's, summing to 1 over the sentence) and its ``token_neighbours``
    nearest target tokens, the k-th of which has similarity s_t^(k), a target sentence j gains
    w_t * (max similarity of t to a token of j among those neighbours - s_t^(k)). A target's score is the sum of its
    gains; BERTScore's recall side, sum_t w_t * max_u sim(t, u), differs from it only by tokens whose best match in
    j lies outside their neighbour list (counted at s_t^(k), an upper bound, and the same constant for every
    target). Sources with fewer than ``top_k`` targets that gained are topped up from the mean-pooled kNN.

    Args:
        source, target: per-sentence features from :func:`bitext_hf.families.onealigner.encode_tokens`.

    Returns:
        int64 ``(n_source, min(top_k, n_target))`` target indices, best first, no repeats within a row.
    """
    from bitext_hf.families.onealigner.token_gain import gain_topk  # numba: loaded on first use only

    n_target = len(target)
    top_k = min(top_k, n_target)
    source_tokens, source_owner, source_weights = _content_tokens(source)
    target_tokens, target_owner, _ = _content_tokens(target)
    neighbours = min(token_neighbours, len(target_tokens))
    if len(source_tokens) * len(target_tokens) > EXACT_TOKEN_PRODUCTS:
        # Token vectors are searched as the model gives them (unit length only in cosine mode): never re-normalized.
        index = ivf_index(target_tokens, nprobe=nprobe, seed=seed, normalize=False)

        def search(queries: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            return index.search(queries, neighbours)

    else:

        def search(queries: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            return knn_search(queries, target_tokens, neighbours, backend=knn_backend, normalize=False)

    candidates = np.full((len(source), top_k), -1, dtype=np.int64)
    # Source tokens are contiguous per sentence: cut the token list at sentence boundaries into chunks.
    boundaries = np.searchsorted(source_owner, np.arange(len(source) + 1))
    start_sentence = 0
    while start_sentence < len(source):
        end_sentence = int(np.searchsorted(boundaries, boundaries[start_sentence] + TOKEN_CHUNK, side="right")) - 1
        end_sentence = max(end_sentence, start_sentence + 1)
        first, last = boundaries[start_sentence], boundaries[end_sentence]
        sims, hits = search(source_tokens[first:last])
        gain_topk(
            np.ascontiguousarray(sims, dtype=np.float32),
            np.ascontiguousarray(hits, dtype=np.int64),
            target_owner,
            source_owner[first:last] - start_sentence,
            source_weights[first:last],
            n_target,
            candidates[start_sentence:end_sentence],
        )
        start_sentence = end_sentence
    missing = np.flatnonzero((candidates < 0).any(axis=1))
    if len(missing):
        # Too few targets gained (very short sources, or IVF cells holding too few tokens): top up from the
        # mean-pooled neighbours, skipping targets already proposed.
        _, pooled = knn_search(_pooled([source[i] for i in missing]), _pooled(target), top_k, backend=knn_backend)
        for row, proposals in zip(missing, pooled):
            have = candidates[row][candidates[row] >= 0]
            proposed = set(have.tolist())
            extra = [index for index in proposals if index not in proposed]
            candidates[row] = np.concatenate([have, extra])[:top_k]
    return candidates


def _content_tokens(encoded: Sequence[OneAlignerFeatures]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Token vectors with a positive BERTScore weight, their sentence index and weight (summing to 1 a sentence)."""
    vectors, owners, weights = [], [], []
    for index, (states, token_weights, _) in enumerate(encoded):
        keep = token_weights > 0
        kept = token_weights[keep].float()
        vectors.append(states[keep].float())
        weights.append(kept / kept.sum())
        owners.append(np.full(int(keep.sum()), index, dtype=np.int64))
    return (
        np.ascontiguousarray(torch.cat(vectors).cpu().numpy(), dtype=np.float32),
        np.concatenate(owners),
        torch.cat(weights).cpu().numpy().astype(np.float32),
    )
