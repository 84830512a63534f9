"""Top-1 cosine retrieval computed with the arithmetic of the evaluators whose numbers bitext_hf reproduces.

Duplicate sentences make near-ties that float32 rounding decides, so a number that claims a peer's definition is that
peer's number only if every cosine is rounded as the peer rounds it and every tie is broken as the peer breaks it.
Both peers score with sentence-transformers' ``cos_sim`` (each side through ``F.normalize``, then one matrix product,
in float32 on torch); the shape of a product matters as well (a product of a few rows runs another kernel than a
larger one and rounds differently), so each function here issues the same products, of the same shapes, as its peer:

* sentence-transformers' ``TranslationEvaluator``: one (n, n) product; ``np.argmax`` along each row and each column
  (ties to the lowest index).
* mteb's ``BitextMiningEvaluator``: products of 100 queries by at most 500,000 candidates, ``torch.topk(1,
  sorted=False)`` of each row (its tie-break is the kernel's, not always the lowest index), and among candidate
  chunks the earliest wins a tie (mteb sorts the chunks' best scores with Python's stable sort).

The default device follows the peers' own default (CUDA, then MPS, else CPU): a GPU rounds differently from a CPU.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import torch

__all__ = ["mteb_nearest_targets", "resolve_device", "translation_nearest"]

# Products of at most this many similarities (float32: 1 GiB) are computed whole, as TranslationEvaluator does;
# larger ones in row blocks, whose cosines may differ from one whole product in the last bit (TranslationEvaluator
# itself would hold all n * n of them in memory).
_WHOLE_PRODUCT_ELEMENTS = 1 << 28

# mteb's BitextMiningEvaluator._similarity_search defaults.
_MTEB_QUERY_CHUNK = 100
_MTEB_CORPUS_CHUNK = 500_000


def resolve_device(device: str | torch.device | None) -> torch.device:
    """``device``, or the peers' default: CUDA when available, then Apple's MPS, else the CPU."""
    if device is not None:
        return torch.device(device)
    if torch.cuda.is_available():
        return torch.device("cuda")
    if torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def _cos_sim(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """The two torch operations of ``sentence_transformers.util.cos_sim`` (and of mteb's ``cos_sim``), written out
    here because importing sentence_transformers takes seconds."""
    a_norm = torch.nn.functional.normalize(a, p=2, dim=-1)
    b_norm = torch.nn.functional.normalize(b, p=2, dim=-1)
    return torch.mm(a_norm, b_norm.transpose(0, 1))


def _as_tensor(embeddings: np.ndarray, device: torch.device) -> torch.Tensor:
    """A float32 tensor view; read-only inputs (memory-mapped .npy files) are fine since nothing writes to it."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
        return torch.from_numpy(np.ascontiguousarray(embeddings, dtype=np.float32)).to(device)


def translation_nearest(
    source_embeddings: np.ndarray, target_embeddings: np.ndarray, device: str | torch.device | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """For each source the index of its most similar target, and for each target the index of its most similar
    source, as sentence-transformers' ``TranslationEvaluator`` finds them (ties to the lowest index)."""
    dev = resolve_device(device)
    src, tgt = _as_tensor(source_embeddings, dev), _as_tensor(target_embeddings, dev)
    n, m = src.shape[0], tgt.shape[0]
    if n * m <= _WHOLE_PRODUCT_ELEMENTS:
        sims = _cos_sim(src, tgt)
        # torch's argmax, like numpy's, returns the first of equal maxima.
        return sims.argmax(dim=1).cpu().numpy(), sims.argmax(dim=0).cpu().numpy()
    # Blocks of equal size, so that no block is a product of a few rows.
    rows = math.ceil(n / math.ceil(n * m / _WHOLE_PRODUCT_ELEMENTS))
    forward = torch.empty(n, dtype=torch.int64, device=dev)
    best_values = torch.full((m,), -math.inf, device=dev)
    best_sources = torch.zeros(m, dtype=torch.int64, device=dev)
    for start in range(0, n, rows):
        sims = _cos_sim(src[start : start + rows], tgt)
        forward[start : start + rows] = sims.argmax(dim=1)
        values, sources = sims.max(dim=0)  # the first of equal maxima within the block
        better = values > best_values  # strictly: an earlier block keeps a tie, so ties go to the lowest index
        best_values = torch.where(better, values, best_values)
        best_sources = torch.where(better, sources + start, best_sources)
    return forward.cpu().numpy(), best_sources.cpu().numpy()


def mteb_nearest_targets(
    query_embeddings: np.ndarray, corpus_embeddings: np.ndarray, device: str | torch.device | None = None
) -> np.ndarray:
    """The index of each query's nearest corpus row, as mteb's ``BitextMiningEvaluator`` finds it."""
    dev = resolve_device(device)
    queries, corpus = _as_tensor(query_embeddings, dev), _as_tensor(corpus_embeddings, dev)
    nearest = np.empty(queries.shape[0], dtype=np.int64)
    for q_start in range(0, queries.shape[0], _MTEB_QUERY_CHUNK):
        chunk = queries[q_start : q_start + _MTEB_QUERY_CHUNK]
        best_values = best_indices = None
        for c_start in range(0, corpus.shape[0], _MTEB_CORPUS_CHUNK):
            sims = _cos_sim(chunk, corpus[c_start : c_start + _MTEB_CORPUS_CHUNK])
            values, indices = torch.topk(sims, 1, dim=1, largest=True, sorted=False)
            values, indices = values[:, 0], indices[:, 0] + c_start
            if best_values is None:
                best_values, best_indices = values, indices
            else:
                better = values > best_values  # strictly: the earlier chunk keeps a tie, as mteb's stable sort does
                best_values = torch.where(better, values, best_values)
                best_indices = torch.where(better, indices, best_indices)
        nearest[q_start : q_start + chunk.shape[0]] = best_indices.cpu().numpy()
    return nearest
