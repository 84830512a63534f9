"""Bitext metrics as pure functions over arrays: xsim, BUCC F1 and retrieval accuracy.

Definitions (see DESIGN.md section 2):
- xsim (LASER): search source -> target only; the candidates of source i are its k nearest targets; the prediction is
  the best-margin candidate (ties to the higher cosine); an error is a prediction other than the gold target or, in
  text mode, a predicted target whose text differs from the gold target's text (duplicate targets are no errors).
- BUCC F1: sweep the threshold over the sorted candidate scores of one split, keep the F1-best (the midpoint between
  neighbouring scores), apply it to another split.
- Retrieval accuracy (Tatoeba-style): top-1 by cosine in both directions, and their mean.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import torch

from bitext_hf.mining.knn import BidirectionalKNN, bidirectional_knn, check_embeddings
from bitext_hf.mining.retrieval import best_forward_candidates

__all__ = [
    "bitext_accuracy",
    "bucc_f1",
    "bucc_labels",
    "bucc_optimal_threshold",
    "xsim",
    "xsim_from_knn",
    "xsim_from_similarity",
    "xsim_micro_average",
]


def _gold_indices(gold: Sequence[int] | np.ndarray | None, n: int, m: int) -> np.ndarray:
    if gold is None:
        if n != m:
            raise ValueError(
                f"source and target have {n} and {m} rows: without `gold`, row i of each must be a translation pair"
            )
        return np.arange(n)
    gold = np.asarray(gold, dtype=np.int64)
    if gold.shape != (n,) or (gold < 0).any() or (gold >= m).any():
        raise ValueError(f"`gold` must hold one target index in [0, {m}) per source row ({n} rows)")
    return gold


def xsim_from_knn(
    knn: BidirectionalKNN,
    *,
    margin: str = "ratio",
    gold: Sequence[int] | None = None,
    target_texts: Sequence[str] | None = None,
) -> dict[str, float | int]:
    """xsim from neighbourhoods already computed (``bitext_hf.mining.bidirectional_knn``), e.g. to report the index
    and the text mode from one search. Same definition as :func:`xsim`."""
    n, m = knn.forward_sims.shape[0], knn.backward_sims.shape[0]
    return _xsim_errors(knn, margin, _gold_indices(gold, n, m), target_texts)


def _xsim_errors(
    knn: BidirectionalKNN, margin: str, gold: np.ndarray, target_texts: Sequence[str] | None
) -> dict[str, float | int]:
    predicted = best_forward_candidates(knn, margin)
    if target_texts is None:
        wrong = predicted != gold
    else:
        if len(target_texts) != knn.backward_sims.shape[0]:
            raise ValueError(f"target_texts has {len(target_texts)} entries for {knn.backward_sims.shape[0]} targets")
        wrong = np.array([target_texts[p] != target_texts[g] for p, g in zip(predicted, gold)], dtype=bool)
    errors, n = int(wrong.sum()), int(wrong.shape[0])
    return {"xsim": 100.0 * errors / n, "errors": errors, "n": n}


def xsim(
    source_embeddings: np.ndarray,
    target_embeddings: np.ndarray,
    *,
    k: int = 4,
    margin: str = "ratio",
    target_texts: Sequence[str] | None = None,
    gold: Sequence[int] | None = None,
    device: str | None = None,
) -> dict[str, float | int]:
    """Margin-based similarity-search error rate (LASER's xsim) from source to target.

    Args:
        source_embeddings (np.ndarray, (n, d)) / target_embeddings (np.ndarray, (m, d)): L2-normalized.
        k (int, defaults to 4): neighbourhood size of the margin and number of candidates.
        margin (str, defaults to "ratio"): "ratio", "distance" or "absolute" (plain nearest neighbour).
        target_texts (list[str], optional): text mode; a prediction with the gold target's text is no error.
        gold (list[int], optional): gold target index of each source (defaults to row i -> row i).

    Returns:
        ``{"xsim": error rate in percent, "errors": count, "n": number of sources}``
    """
    src = check_embeddings(source_embeddings, "source embeddings")
    tgt = check_embeddings(target_embeddings, "target embeddings")
    gold_idx = _gold_indices(gold, src.shape[0], tgt.shape[0])
    knn = bidirectional_knn(src, tgt, k, device=device)
    return _xsim_errors(knn, margin, gold_idx, target_texts)


def xsim_from_similarity(
    similarity: np.ndarray,
    *,
    k: int = 4,
    margin: str = "ratio",
    target_texts: Sequence[str] | None = None,
    gold: Sequence[int] | None = None,
) -> dict[str, float | int]:
    """xsim from a full (n, m) similarity matrix, for models whose similarity is not an inner product of sentence
    embeddings (e.g. OneAligner's BERTScore). Same definition as :func:`xsim`."""
    sim = np.asarray(similarity, dtype=np.float32)
    if sim.ndim != 2 or 0 in sim.shape:
        raise ValueError(f"similarity must be a non-empty 2-D matrix, got shape {sim.shape}")
    if not np.isfinite(sim).all():
        raise ValueError("similarity matrix contains NaN or inf")
    n, m = sim.shape
    k_fwd, k_bwd = min(k, m), min(k, n)
    matrix = torch.from_numpy(sim)
    fwd_sims, fwd_idx = matrix.topk(k_fwd, dim=1)
    bwd_sims, bwd_idx = matrix.T.topk(k_bwd, dim=1)
    knn = BidirectionalKNN(fwd_sims.numpy(), fwd_idx.numpy(), bwd_sims.numpy(), bwd_idx.numpy())
    return _xsim_errors(knn, margin, _gold_indices(gold, n, m), target_texts)


def xsim_micro_average(results: Iterable[Mapping[str, float | int]]) -> dict[str, float | int]:
    """Micro-average of several language pairs: sum(errors) / sum(n), in percent."""
    results = list(results)
    if not results:
        raise ValueError("xsim_micro_average needs at least one result")
    errors = sum(int(r["errors"]) for r in results)
    n = sum(int(r["n"]) for r in results)
    return {"xsim": 100.0 * errors / n, "errors": errors, "n": n}


def _top1_lowest_index(knn_sims: np.ndarray, knn_indices: np.ndarray) -> np.ndarray:
    """Top-1 with ties broken towards the lowest index (as ``np.argmax`` on the full row)."""
    best = knn_sims[:, :1]
    tied = knn_sims == best
    return np.where(tied, knn_indices, np.iinfo(np.int64).max).min(axis=1)


def bitext_accuracy(
    source_embeddings: np.ndarray, target_embeddings: np.ndarray, *, device: str | None = None
) -> dict[str, float]:
    """Top-1 cosine retrieval accuracy in both directions (row i of each side is a translation pair).

    Returns:
        ``{"src2tgt_accuracy", "tgt2src_accuracy", "accuracy"}`` (fractions; accuracy is their mean).
    """
    src = check_embeddings(source_embeddings, "source embeddings")
    tgt = check_embeddings(target_embeddings, "target embeddings")
    if src.shape[0] != tgt.shape[0]:
        raise ValueError(f"bitext_accuracy needs aligned rows: {src.shape[0]} source vs {tgt.shape[0]} target")
    # A few neighbours per side so that exact ties (duplicate sentences) resolve to the lowest index.
    knn = bidirectional_knn(src, tgt, 8, device=device)
    gold = np.arange(src.shape[0])
    src2tgt = float((_top1_lowest_index(knn.forward_sims, knn.forward_indices) == gold).mean())
    tgt2src = float((_top1_lowest_index(knn.backward_sims, knn.backward_indices) == gold).mean())
    return {"src2tgt_accuracy": src2tgt, "tgt2src_accuracy": tgt2src, "accuracy": (src2tgt + tgt2src) / 2}


def bucc_labels(
    candidates: Iterable[tuple[object, object]], gold: Iterable[tuple[object, object]]
) -> tuple[np.ndarray, int]:
    """Gold labels of candidate (src_id, tgt_id) pairs and the number of gold pairs."""
    gold_set = set(gold)
    labels = np.array([pair in gold_set for pair in candidates], dtype=bool)
    return labels, len(gold_set)


def bucc_optimal_threshold(scores: np.ndarray, labels: np.ndarray, n_gold: int | None = None) -> float:
    """The F1-best threshold over candidate scores: the midpoint between the last kept and the first dropped score.

    Args:
        scores: candidate pair scores; labels: whether each candidate is a gold pair; n_gold: number of gold pairs
            (defaults to the number of positive labels; gold pairs missing from the candidates lower recall).
    """
    scores, labels = _check_scored_labels(scores, labels, "train")
    n_gold = int(labels.sum()) if n_gold is None else int(n_gold)
    if n_gold <= 0:
        raise ValueError("no gold pairs: the BUCC threshold cannot be optimised")
    order = np.argsort(-scores, kind="stable")
    sorted_scores, true_positives = scores[order], np.cumsum(labels[order])
    kept = np.arange(1, scores.size + 1)
    # Only cut where the next score differs: equal scores cannot be separated by a threshold.
    cut = np.append(sorted_scores[1:] != sorted_scores[:-1], True)
    precision = true_positives / kept
    recall = true_positives / n_gold
    with np.errstate(invalid="ignore", divide="ignore"):
        f1 = np.where(true_positives > 0, 2 * precision * recall / (precision + recall), 0.0)
    f1 = np.where(cut, f1, -1.0)
    best = int(np.argmax(f1))
    if best == scores.size - 1:
        return float(sorted_scores[best])
    return float((sorted_scores[best] + sorted_scores[best + 1]) / 2)


def _check_scored_labels(scores, labels, split: str) -> tuple[np.ndarray, np.ndarray]:
    scores = np.asarray(scores, dtype=np.float64).ravel()
    labels = np.asarray(labels).astype(bool).ravel()
    if scores.shape != labels.shape:
        raise ValueError(f"{split} split: {scores.size} scores but {labels.size} labels")
    if scores.size == 0:
        raise ValueError(f"{split} split has no candidate pairs")
    if not np.isfinite(scores).all():
        raise ValueError(f"{split} split: scores contain NaN or inf")
    return scores, labels


def bucc_f1(
    test_scores: np.ndarray,
    test_labels: np.ndarray,
    *,
    n_gold_test: int | None = None,
    train_scores: np.ndarray | None = None,
    train_labels: np.ndarray | None = None,
    n_gold_train: int | None = None,
    threshold: float | None = None,
) -> dict[str, float]:
    """BUCC precision / recall / F1 of the candidates with ``score >= threshold`` on the test split.

    The threshold is, in order: the given ``threshold``; the F1-best threshold on the train split; the F1-best
    threshold on the test split itself (an oracle, reported as such by BUCC papers).
    """
    scores, labels = _check_scored_labels(test_scores, test_labels, "test")
    if threshold is None:
        if train_scores is not None:
            threshold = bucc_optimal_threshold(train_scores, train_labels, n_gold_train)
        else:
            threshold = bucc_optimal_threshold(scores, labels, n_gold_test)
    n_gold = int(labels.sum()) if n_gold_test is None else int(n_gold_test)
    kept = scores >= threshold
    true_positives = int((kept & labels).sum())
    precision = true_positives / int(kept.sum()) if kept.any() else 0.0
    recall = true_positives / n_gold if n_gold else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": precision, "recall": recall, "f1": f1, "threshold": float(threshold)}
