"""Bitext metrics as pure functions over arrays: xsim, BUCC F1 and retrieval accuracy.

Definitions (see DESIGN.md section 2):
- xsim (LASER): search source -> target only; the candidates of source i are its k nearest targets; the prediction is
  the best-margin candidate (ties to the higher cosine); an error is a prediction other than the gold target or, in
  text mode, a predicted target whose text differs from the gold target's text (duplicate targets are no errors).
- BUCC F1: sweep the threshold over the sorted candidate scores of one split, keep the F1-best (the midpoint between
  neighbouring scores), apply it to another split.
- Retrieval accuracy (Tatoeba-style, sentence-transformers' TranslationEvaluator): top-1 by cosine in both
  directions, and their mean; given the texts, retrieving a sentence with the gold sentence's text is a hit.
- MTEB's bitext mining (so numbers compare with its leaderboard): for each gold pair (i, j), the nearest sentence2 of
  sentence1 i by cosine is the prediction and j the label; accuracy, and precision / recall / F1 with scikit-learn's
  ``average="weighted"`` and ``zero_division=0`` over those labels; main_score = F1. All fractions in [0, 1].
- The last two equal their peer's numbers exactly, duplicates and ties included: the cosines and their ties are
  computed as the peer computes them (``bitext_hf.evaluation.metrics.peer_retrieval``), never through the mining
  search.

Every function validates its inputs and raises DataValidationError (a ValueError) for shapes that do not match, NaN,
negative counts, labels that exceed the gold count and gold indices out of range.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import torch

from bitext_hf.errors import DataValidationError
from bitext_hf.evaluation.metrics.peer_retrieval import mteb_nearest_targets, translation_nearest
from bitext_hf.mining.knn import BidirectionalKNN, bidirectional_knn, check_k, check_pair
from bitext_hf.mining.retrieval import best_forward_candidates

__all__ = [
    "bitext_accuracy",
    "bucc_f1",
    "bucc_labels",
    "bucc_optimal_threshold",
    "check_labels",
    "mteb_bitext_mining",
    "xsim",
    "xsim_from_knn",
    "xsim_from_similarity",
    "xsim_micro_average",
]


def _integer_array(values, what: str) -> np.ndarray:
    """``values`` as int64; refuses floats that are not whole numbers (NaN included) instead of truncating them."""
    try:
        array = np.asarray(values)
    except ValueError:  # ragged nested lists
        raise DataValidationError(f"{what} must be integer indices of one shape") from None
    if array.dtype == bool or not (np.issubdtype(array.dtype, np.integer) or np.issubdtype(array.dtype, np.floating)):
        raise DataValidationError(f"{what} must be integer indices, got dtype {array.dtype}")
    if np.issubdtype(array.dtype, np.floating) and not (np.isfinite(array).all() and (array == np.round(array)).all()):
        raise DataValidationError(f"{what} must be integer indices, got non-integer values")
    return array.astype(np.int64)


def _gold_indices(gold: Sequence[int] | np.ndarray | None, n: int, m: int) -> np.ndarray:
    if gold is None:
        if n != m:
            raise DataValidationError(
                f"source and target have {n} and {m} rows: without `gold`, row i of each must be a translation pair"
            )
        return np.arange(n)
    gold = _integer_array(gold, "`gold`")
    if gold.shape != (n,) or (gold < 0).any() or (gold >= m).any():
        raise DataValidationError(f"`gold` must hold one target index in [0, {m}) per source row ({n} rows)")
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
            raise DataValidationError(
                f"target_texts has {len(target_texts)} entries for {knn.backward_sims.shape[0]} targets"
            )
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
    src, tgt = check_pair(source_embeddings, target_embeddings, "source embeddings", "target embeddings")
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
        raise DataValidationError(f"similarity must be a non-empty 2-D matrix, got shape {sim.shape}")
    if not np.isfinite(sim).all():
        raise DataValidationError("similarity matrix contains NaN or inf")
    check_k(k, *sim.shape)
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
        raise DataValidationError("xsim_micro_average needs at least one result")
    counts = []
    for position, result in enumerate(results):
        try:
            errors, n = result["errors"], result["n"]
        except (KeyError, TypeError):
            raise DataValidationError(f"result {position}: expected a mapping with 'errors' and 'n'") from None
        if not all(_is_count(value) for value in (errors, n)) or not 0 <= errors <= n or n == 0:
            raise DataValidationError(
                f"result {position}: errors={errors!r}, n={n!r}; expected whole counts with 0 <= errors <= n and n > 0"
            )
        counts.append((int(errors), int(n)))
    errors, n = sum(e for e, _ in counts), sum(c for _, c in counts)
    return {"xsim": 100.0 * errors / n, "errors": errors, "n": n}


def _is_count(value) -> bool:
    """A whole number (an int, or a float such as 3.0 read back from JSON), not a bool, NaN or a fraction."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        return False
    return bool(np.isfinite(value)) and float(value) == int(value)


def _peer_inputs(source_embeddings: np.ndarray, target_embeddings: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Both sides as float32, as the peers score them, after the checks of ``check_embeddings`` but without its
    normalization: each peer normalizes with its own arithmetic, and so do the functions that reproduce it."""
    src, tgt = check_pair(source_embeddings, target_embeddings, "source embeddings", "target embeddings", False)
    for name, array in (("source embeddings", src), ("target embeddings", tgt)):
        zero = np.flatnonzero(~array.any(axis=1))
        if zero.size:
            raise DataValidationError(
                f"{name}: row {int(zero[0])} (0-based) is all zeros ({zero.size} such row(s)); a zero vector has no "
                "direction, so it has no cosine with anything"
            )
    return src, tgt


def _text_ids(texts: Sequence[str] | None, n: int, what: str) -> np.ndarray | None:
    """One integer per text, equal for equal texts (so that hits are compared as integers); None stays None."""
    if texts is None:
        return None
    if isinstance(texts, str) or len(texts) != n:
        raise DataValidationError(f"{what} must hold one text per row ({n} rows), got {_length(texts)}")
    wrong = next((row for row, text in enumerate(texts) if not isinstance(text, str)), None)
    if wrong is not None:
        raise DataValidationError(f"{what}: row {wrong} is a {type(texts[wrong]).__name__}, not a string")
    ids: dict[str, int] = {}
    return np.fromiter((ids.setdefault(text, len(ids)) for text in texts), dtype=np.int64, count=n)


def _length(texts) -> str:
    return "a single string" if isinstance(texts, str) else f"{len(texts)} entries"


def _hits(predicted: np.ndarray, text_ids: np.ndarray | None) -> np.ndarray:
    """Row i is a hit when row i is retrieved or, given the texts, a row with row i's text."""
    gold = np.arange(predicted.shape[0])
    if text_ids is None:
        return predicted == gold
    return text_ids[predicted] == text_ids


def bitext_accuracy(
    source_embeddings: np.ndarray,
    target_embeddings: np.ndarray,
    *,
    source_texts: Sequence[str] | None = None,
    target_texts: Sequence[str] | None = None,
    device: str | None = None,
) -> dict[str, float]:
    """Top-1 cosine retrieval accuracy in both directions, as sentence-transformers' ``TranslationEvaluator``.

    Row i of each side is a translation pair. Source i is a hit when its most similar target (ties to the lowest
    index) is target i or, given ``target_texts``, a target with target i's text; target i likewise, with
    ``source_texts``. With both texts the three numbers equal ``TranslationEvaluator``'s ``src2trg_accuracy``,
    ``trg2src_accuracy`` and ``mean_accuracy`` exactly, duplicate sentences and ties included (the cosines are
    computed as it computes them: the same torch operations, on the same default device); without texts they equal
    them when no sentence repeats, and a duplicate counts only at its own row. Beyond 2**28 similarities, which the
    evaluator would hold in memory at once, they are computed in row blocks and may differ from its in the last bit.

    Args:
        source_embeddings (np.ndarray, (n, d)): the encoder's output for the sources, in float32 (normalized
            here, as sentence-transformers normalizes it).
        target_embeddings (np.ndarray, (n, d)): the encoder's output for the targets, likewise.
        source_texts (list[str], optional): the source sentences, n.
        target_texts (list[str], optional): the target sentences, n.
        device (str, optional): where the cosines are computed; defaults to CUDA, then MPS, else the CPU, as
            sentence-transformers places a model (a GPU rounds near-ties differently from a CPU).

    Returns:
        ``{"src2tgt_accuracy", "tgt2src_accuracy", "accuracy"}`` (fractions; accuracy is their mean).
    """
    src, tgt = _peer_inputs(source_embeddings, target_embeddings)
    n, m = src.shape[0], tgt.shape[0]
    if n != m:
        raise DataValidationError(f"bitext_accuracy needs aligned rows: {n} source vs {m} target")
    source_ids = _text_ids(source_texts, n, "source_texts")
    target_ids = _text_ids(target_texts, n, "target_texts")
    forward, backward = translation_nearest(src, tgt, device)
    src2tgt = float(_hits(forward, target_ids).mean())
    tgt2src = float(_hits(backward, source_ids).mean())
    return {"src2tgt_accuracy": src2tgt, "tgt2src_accuracy": tgt2src, "accuracy": (src2tgt + tgt2src) / 2}


def _gold_pairs(gold, n: int, m: int) -> np.ndarray:
    """MTEB's gold: (i, j) index pairs, (g, 2) int64; None means row i with row i (equal row counts)."""
    if gold is None:
        if n != m:
            raise DataValidationError(
                f"source and target have {n} and {m} rows: without `gold`, row i of each must be a translation pair"
            )
        return np.repeat(np.arange(n, dtype=np.int64)[:, None], 2, axis=1)
    pairs = _integer_array(gold, "`gold`") if len(gold) else np.empty((0, 2), np.int64)
    if pairs.ndim != 2 or pairs.shape[1] != 2 or pairs.shape[0] == 0:
        raise DataValidationError(
            f"`gold` must be a non-empty list of (source, target) index pairs, got {pairs.shape}"
        )
    for column, (side, size) in enumerate((("source", n), ("target", m))):
        bad = np.flatnonzero((pairs[:, column] < 0) | (pairs[:, column] >= size))
        if bad.size:
            raise DataValidationError(
                f"`gold` pair {int(bad[0])} has {side} index {int(pairs[bad[0], column])}, outside [0, {size})"
            )
    return pairs


def mteb_bitext_mining(
    source_embeddings: np.ndarray,
    target_embeddings: np.ndarray,
    gold: Sequence[tuple[int, int]] | np.ndarray | None = None,
    *,
    device: str | None = None,
) -> dict[str, float]:
    """MTEB's bitext-mining metrics, as its BitextMining tasks compute them (comparable with the MTEB leaderboard).

    For each gold pair (i, j), in order, the prediction is the target nearest to source i by cosine and the label is
    j. ``accuracy`` is scikit-learn's ``accuracy_score``; ``precision``, ``recall`` and ``f1`` are scikit-learn's
    with ``average="weighted"`` (per-label scores weighted by each label's number of gold pairs) and
    ``zero_division=0``; ``main_score`` is ``f1``. Weighted recall equals accuracy by definition.

    The numbers equal those of mteb's own evaluator exactly, duplicate sentences and ties included: the cosines are
    computed with its torch operations, in its chunks of 100 sources, and a tie between targets goes where its
    ``torch.topk`` puts it (not always the lowest index). mteb's sentence1 column is the gold pairs' sources in gold
    order (its BUCC task builds it so from a ``gold`` column); mteb scores on CUDA when available, and so does this.

    Args:
        source_embeddings (np.ndarray, (n, d)): the sentence1 column; target_embeddings (np.ndarray, (m, d)): the
            sentence2 column (the candidate pool); the encoder's output, in float32 (normalized here, as mteb
            normalizes it).
        gold (optional): (i, j) index pairs; defaults to row i with row i (then n must equal m).
        device (str, optional): where the cosines are computed; defaults to CUDA, then MPS, else the CPU, as mteb.

    Returns:
        ``{"accuracy", "precision", "recall", "f1", "main_score"}``: fractions in [0, 1].
    """
    # scikit-learn computes the weighted scores: the exact functions MTEB calls, so the numbers match by construction.
    from sklearn.metrics import accuracy_score, f1_score, precision_score, recall_score

    src, tgt = _peer_inputs(source_embeddings, target_embeddings)
    pairs = _gold_pairs(gold, src.shape[0], tgt.shape[0])
    queries = src if gold is None else src[pairs[:, 0]]
    predictions, labels = mteb_nearest_targets(queries, tgt, device), pairs[:, 1]
    scores = {
        name: float(function(labels, predictions, average="weighted", zero_division=0))
        for name, function in (("precision", precision_score), ("recall", recall_score), ("f1", f1_score))
    }
    scores["accuracy"] = float(accuracy_score(labels, predictions))
    scores["main_score"] = scores["f1"]
    return scores


def bucc_labels(
    candidates: Iterable[tuple[object, object]], gold: Iterable[tuple[object, object]]
) -> tuple[np.ndarray, int]:
    """Gold labels of candidate (src_id, tgt_id) pairs and the number of gold pairs."""
    gold_set = set(gold)
    labels = np.array([pair in gold_set for pair in candidates], dtype=bool)
    return labels, len(gold_set)


def bucc_optimal_threshold(
    scores: np.ndarray, labels: np.ndarray, n_gold: int | None = None, *, split: str = "train"
) -> float:
    """The F1-best threshold over candidate scores: the midpoint between the last kept and the first dropped score.

    Args:
        scores: candidate pair scores; labels: whether each candidate is a gold pair (bool or 0/1); n_gold: number of
            gold pairs (defaults to the number of positive labels; gold pairs missing from the candidates lower
            recall, so it can never be below that number).
        split: the split's name in error messages.
    """
    scores, labels, n_gold = _check_scored_labels(scores, labels, n_gold, split)
    if n_gold == 0:
        raise DataValidationError(f"{split} split: no gold pairs, so the BUCC threshold cannot be optimised")
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


def _check_scored_labels(scores, labels, n_gold, split: str) -> tuple[np.ndarray, np.ndarray, int]:
    """Scores as float64, labels as bool and the gold count, after checking that they describe one split."""
    scores = np.asarray(scores, dtype=np.float64).ravel()
    raw_labels = np.asarray(labels).ravel()
    if scores.shape != raw_labels.shape:
        raise DataValidationError(f"{split} split: {scores.size} scores but {raw_labels.size} labels")
    if scores.size == 0:
        raise DataValidationError(f"{split} split has no candidate pairs")
    if not np.isfinite(scores).all():
        raise DataValidationError(f"{split} split: scores contain NaN or inf")
    labels = check_labels(raw_labels, f"{split} split: labels")
    positives = int(labels.sum())
    if n_gold is None:
        return scores, labels, positives
    if not _is_count(n_gold) or n_gold < 0:
        raise DataValidationError(
            f"{split} split: the number of gold pairs must be a whole number >= 0, got {n_gold!r}"
        )
    if positives > n_gold:
        raise DataValidationError(
            f"{split} split: {positives} candidates are labelled gold but there are only {int(n_gold)} gold pairs "
            "(duplicate candidates, or a gold count from another split?)"
        )
    return scores, labels, int(n_gold)


def check_labels(labels, what: str = "labels") -> np.ndarray:
    """Gold labels as booleans, after refusing any that is not a boolean or 0/1 (naming the values): astype(bool)
    alone would read 2, -1 or NaN as "gold".

    Raises:
        DataValidationError (a ValueError): the first few values outside {0, 1}.
    """
    raw = np.asarray(labels).ravel()
    if raw.dtype == bool:
        return raw
    if not (np.issubdtype(raw.dtype, np.integer) or np.issubdtype(raw.dtype, np.floating)):
        raise DataValidationError(f"{what} must be 0/1 or booleans, got dtype {raw.dtype}")
    wrong = raw[~np.isin(raw, (0, 1))]
    if wrong.size:
        distinct = list(dict.fromkeys(wrong.tolist()))  # in the order met, each once
        shown = ", ".join(f"{value:g}" for value in distinct[:5]) + (", ..." if len(distinct) > 5 else "")
        raise DataValidationError(f"{what} must be 0/1 or booleans, got {shown}")
    return raw.astype(bool)


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

    Raises:
        DataValidationError: scores and labels of different lengths, NaN scores or threshold, labels other than
            0/1, a negative gold count or one below the number of positive labels, train scores without labels.
    """
    scores, labels, n_gold = _check_scored_labels(test_scores, test_labels, n_gold_test, "test")
    if (train_scores is None) != (train_labels is None):
        raise DataValidationError("give both train_scores and train_labels, or neither")
    if threshold is None:
        if train_scores is not None:
            threshold = bucc_optimal_threshold(train_scores, train_labels, n_gold_train, split="train")
        else:
            threshold = bucc_optimal_threshold(scores, labels, n_gold, split="test")
    elif not _is_number(threshold):
        raise DataValidationError(f"the BUCC threshold must be a finite number, got {threshold!r}")
    kept = scores >= threshold
    true_positives = int((kept & labels).sum())
    precision = true_positives / int(kept.sum()) if kept.any() else 0.0
    recall = true_positives / n_gold if n_gold else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": precision, "recall": recall, "f1": f1, "threshold": float(threshold)}


def _is_number(value) -> bool:
    return not isinstance(value, bool) and isinstance(value, (int, float, np.number)) and bool(np.isfinite(value))
