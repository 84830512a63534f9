"""From neighbourhoods to pairs: margin-scored candidates, the retrieval modes and the threshold.

Modes (Artetxe & Schwenk, 2019): ``forward`` keeps each source's best-margin target among its k nearest; ``backward``
the same for each target; ``intersect`` keeps the pairs found both ways; ``union`` the pairs found either way;
``max`` sorts the forward and backward best pairs by score and keeps them greedily so that each sentence is used at
most once. The threshold, when given, applies in every mode (a pair is kept when ``score >= threshold``).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import numpy as np

from bitext_hf.errors import UsageError
from bitext_hf.mining.margin import apply_margin, check_margin, neighbourhood_means

if TYPE_CHECKING:  # annotations only: the kNN module imports torch, which the options' checks do not need
    from bitext_hf.mining.knn import BidirectionalKNN

__all__ = ["DEFAULT_MODE", "MODES", "MinedPairs", "Mode", "candidate_scores", "check_settings", "retrieve"]

Mode = Literal["forward", "backward", "intersect", "union", "max"]
MODES: tuple[str, ...] = ("forward", "backward", "intersect", "union", "max")
# The one default retrieval mode of mine, mine_documents and the CLI.
DEFAULT_MODE: Mode = "max"


@dataclass
class MinedPairs:
    """Mined sentence pairs, sorted by decreasing score.

    Iterating yields ``(src_index, tgt_index, score)`` tuples.

    Attributes:
        src_indices (np.ndarray of int64): row in the source embeddings.
        tgt_indices (np.ndarray of int64): row in the target embeddings.
        scores (np.ndarray of float32): margin scores.
        cosines (np.ndarray of float32): plain cosine similarities of the pairs.
        doc_ids (np.ndarray, optional): the document of each pair (document-level mining), else None.
        quality (np.ndarray of float32, optional): the pair classifier's probability that each pair is a
            translation (:mod:`bitext_hf.mining.quality`), when it was asked for.
    """

    src_indices: np.ndarray
    tgt_indices: np.ndarray
    scores: np.ndarray
    cosines: np.ndarray
    doc_ids: np.ndarray | None = None
    quality: np.ndarray | None = None

    @classmethod
    def empty(cls) -> MinedPairs:
        return cls(np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0, np.float32), np.empty(0, np.float32))

    def __len__(self) -> int:
        return int(self.src_indices.shape[0])

    def __iter__(self) -> Iterator[tuple[int, int, float]]:
        yield from zip(self.src_indices.tolist(), self.tgt_indices.tolist(), self.scores.tolist())

    def as_set(self) -> set[tuple[int, int]]:
        """The (src_index, tgt_index) pairs as a set."""
        return set(zip(self.src_indices.tolist(), self.tgt_indices.tolist()))

    def select(self, mask_or_order: np.ndarray) -> MinedPairs:
        return MinedPairs(
            self.src_indices[mask_or_order],
            self.tgt_indices[mask_or_order],
            self.scores[mask_or_order],
            self.cosines[mask_or_order],
            None if self.doc_ids is None else self.doc_ids[mask_or_order],
            None if self.quality is None else self.quality[mask_or_order],
        )

    def sorted(self) -> MinedPairs:
        """Sorted by decreasing score, ties by source then target index (deterministic)."""
        order = np.lexsort((self.tgt_indices, self.src_indices, -self.scores))
        return self.select(order)

    def offset(self, src_offset: np.ndarray, tgt_offset: np.ndarray) -> MinedPairs:
        """Map local indices to global ones through index arrays (document-level mining)."""
        return MinedPairs(
            src_offset[self.src_indices],
            tgt_offset[self.tgt_indices],
            self.scores,
            self.cosines,
            self.doc_ids,
            self.quality,
        )

    @classmethod
    def concatenate(cls, parts: list[MinedPairs]) -> MinedPairs:
        """All pairs of ``parts``; ``doc_ids`` and ``quality`` are kept when every part has them (an error when only
        some do)."""
        if not parts:
            return cls.empty()
        fields: tuple[str, ...] = ("src_indices", "tgt_indices", "scores", "cosines")
        for optional, named in (("doc_ids", "document ids"), ("quality", "quality")):
            having = sum(getattr(p, optional) is not None for p in parts)
            if having not in (0, len(parts)):
                raise ValueError(f"cannot concatenate pairs with {named} and pairs without")
            fields += (optional,) if having else ()
        return cls(**{f: np.concatenate([getattr(p, f) for p in parts]) for f in fields})


def candidate_scores(knn: BidirectionalKNN, margin: str) -> tuple[np.ndarray, np.ndarray]:
    """Margin scores of every forward candidate (N, kf) and every backward candidate (M, kb)."""
    check_margin(margin)
    source_mean = neighbourhood_means(knn.forward_sims)
    target_mean = neighbourhood_means(knn.backward_sims)
    forward = apply_margin(knn.forward_sims, source_mean[:, None], target_mean[knn.forward_indices], margin)
    backward = apply_margin(knn.backward_sims, source_mean[knn.backward_indices], target_mean[:, None], margin)
    return forward, backward


def best_forward_candidates(knn: BidirectionalKNN, margin: str) -> np.ndarray:
    """The best-margin target of every source (forward retrieval's choice), (N,) int64."""
    forward, _ = candidate_scores(knn, margin)
    return _best(forward, knn.forward_sims, knn.forward_indices)[0]


def _best(scores: np.ndarray, sims: np.ndarray, indices: np.ndarray) -> tuple[np.ndarray, ...]:
    """Best-margin candidate per row. Candidates are sorted by decreasing cosine, so argmax (first maximum) breaks
    score ties towards the higher cosine."""
    column = scores.argmax(axis=1)
    rows = np.arange(scores.shape[0])
    return indices[rows, column], scores[rows, column], sims[rows, column]


def _keys(src: np.ndarray, tgt: np.ndarray, n_tgt: int) -> np.ndarray:
    return src.astype(np.int64) * n_tgt + tgt.astype(np.int64)


def check_settings(margin: str, mode: str, threshold: float | None) -> None:
    """UsageError for an unknown margin or mode, or a threshold that is not a finite number (NaN keeps nothing)."""
    check_margin(margin)
    if mode not in MODES:
        raise UsageError(f"unknown retrieval mode {mode!r}; choose one of {', '.join(MODES)}")
    if threshold is not None and (
        isinstance(threshold, bool) or not isinstance(threshold, (int, float, np.number)) or not np.isfinite(threshold)
    ):
        raise UsageError(f"the threshold must be a finite number, got {threshold!r}")


def retrieve(knn: BidirectionalKNN, *, margin: str = "ratio", mode: str = "max", threshold: float | None = None):
    """Pairs from neighbourhoods by margin, retrieval ``mode`` and ``threshold``; see the module docstring."""
    check_settings(margin, mode, threshold)
    forward_scores, backward_scores = candidate_scores(knn, margin)
    n, m = forward_scores.shape[0], backward_scores.shape[0]

    fwd_tgt, fwd_score, fwd_cos = _best(forward_scores, knn.forward_sims, knn.forward_indices)
    forward = MinedPairs(np.arange(n, dtype=np.int64), fwd_tgt.astype(np.int64), fwd_score, fwd_cos)
    bwd_src, bwd_score, bwd_cos = _best(backward_scores, knn.backward_sims, knn.backward_indices)
    backward = MinedPairs(bwd_src.astype(np.int64), np.arange(m, dtype=np.int64), bwd_score, bwd_cos)

    if mode == "forward":
        pairs = forward
    elif mode == "backward":
        pairs = backward
    elif mode in ("intersect", "union"):
        fwd_keys = _keys(forward.src_indices, forward.tgt_indices, m)
        bwd_keys = _keys(backward.src_indices, backward.tgt_indices, m)
        if mode == "intersect":
            pairs = forward.select(np.isin(fwd_keys, bwd_keys))
        else:
            # A pair found both ways has the same score both ways; keep the forward copy.
            pairs = MinedPairs.concatenate([forward, backward.select(~np.isin(bwd_keys, fwd_keys))])
    else:
        pairs = _greedy_one_to_one(MinedPairs.concatenate([forward, backward]), n, m)

    if threshold is not None:
        # In float64: a threshold beyond float32's range (1e308) must compare, not overflow into a warning.
        pairs = pairs.select(pairs.scores.astype(np.float64) >= float(threshold))
    return pairs.sorted()


def _greedy_one_to_one(candidates: MinedPairs, n: int, m: int) -> MinedPairs:
    """Keep candidates by decreasing score (stable: forward before backward on ties), each sentence used once."""
    order = np.argsort(-candidates.scores, kind="stable")
    src_used = np.zeros(n, dtype=bool)
    tgt_used = np.zeros(m, dtype=bool)
    keep = []
    for position, src, tgt in zip(
        order.tolist(), candidates.src_indices[order].tolist(), candidates.tgt_indices[order].tolist()
    ):
        if not src_used[src] and not tgt_used[tgt]:
            src_used[src] = tgt_used[tgt] = True
            keep.append(position)
    return candidates.select(np.asarray(keep, dtype=np.int64))
