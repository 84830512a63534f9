"""How good a pair classifier is, on held-out pairs: ranking (AUC), decisions at 0.5 (MCC, F1, precision, recall),
calibration (expected calibration error), and what it does with each kind of wrong pair, beside the encoder's own
cosine and margin (the baselines: AUC, and MCC at the threshold that is best on the calibration pairs). The Platt
scaling that makes its probabilities calibrated is fitted here too (:func:`fit_calibration`)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from bitext_hf.mining.quality import CALIBRATION_BINS, calibration_bins

__all__ = [
    "best_threshold",
    "evaluate_quality",
    "evaluate_sets",
    "expected_calibration_error",
    "fit_calibration",
    "light_probabilities",
    "raw_logits",
]

# A classifier's calibrated probabilities of a prepared dataset's pairs (its ``features``, or ``source``/``target``).
Probabilities = Callable[[Any], np.ndarray]


def raw_logits(model: Any, features: Any, batch_size: int = 65536) -> np.ndarray:
    """The model's uncalibrated logits of ``features`` (n, F)."""
    features = torch.as_tensor(np.asarray(features, dtype=np.float32))
    out = []
    model.eval()
    with torch.inference_mode():
        for start in range(0, len(features), batch_size):
            out.append(model(features=features[start : start + batch_size].to(model.device)).logits.float().cpu())
    return torch.cat(out).numpy() if out else np.zeros(0, dtype=np.float32)


def light_probabilities(model: Any) -> Probabilities:
    """The light classifier's calibrated probabilities of a dataset's ``features``."""
    return lambda dataset: model.calibrate(torch.as_tensor(raw_logits(model, dataset["features"]))).numpy()


def fit_calibration(logits: np.ndarray, labels: np.ndarray) -> tuple[float, float]:
    """Platt scaling: (a, b) with ``sigmoid(a * logit + b)`` the fitted probability (scikit-learn's logistic
    regression on the one logit, unregularised)."""
    from sklearn.linear_model import LogisticRegression

    fitted = LogisticRegression(C=1e6, max_iter=1000).fit(np.asarray(logits).reshape(-1, 1), np.asarray(labels))
    return float(fitted.coef_[0, 0]), float(fitted.intercept_[0])


def expected_calibration_error(probabilities: np.ndarray, labels: np.ndarray, bins: int = CALIBRATION_BINS) -> float:
    """Sum over equal-width probability bins of (bin's share of pairs) x |share of translations - mean probability|
    (the bins of :func:`bitext_hf.mining.quality.calibration_bins`, which the card's reliability diagram draws).
    Written here: scikit-learn's ``calibration_curve`` gives the bins' means but not their sizes."""
    return float(
        sum(share * abs(positive - mean) for share, mean, positive in calibration_bins(probabilities, labels, bins))
    )


def best_threshold(scores: np.ndarray, labels: np.ndarray) -> float:
    """The threshold on ``scores`` with the best MCC (the baselines' decision rule, chosen on calibration pairs)."""
    from sklearn.metrics import matthews_corrcoef

    candidates = np.unique(np.quantile(scores, np.linspace(0.01, 0.99, 99)))
    return float(max(candidates, key=lambda t: matthews_corrcoef(labels, scores >= t)))


def evaluate_quality(
    probabilities: np.ndarray,
    labels: np.ndarray,
    kinds: list[str],
    *,
    cosines: np.ndarray | None = None,
    margins: np.ndarray | None = None,
    baseline_thresholds: dict[str, float] | None = None,
) -> dict[str, Any]:
    """The metrics of one held-out set: ``auc``, ``mcc``, ``f1``, ``precision``, ``recall`` (at 0.5), ``ece``,
    ``kept`` (the correct pairs at or above 0.5) and ``rejected/<kind>`` (the wrong pairs of each kind below it), and
    with ``cosines`` / ``margins`` the same AUC and MCC for each (MCC at ``baseline_thresholds``)."""
    from sklearn.metrics import f1_score, matthews_corrcoef, precision_score, recall_score, roc_auc_score

    labels = np.asarray(labels).astype(np.int64)
    probabilities = np.asarray(probabilities, dtype=np.float64)
    decided = probabilities >= 0.5
    metrics: dict[str, Any] = {
        "pairs": len(labels),
        "auc": float(roc_auc_score(labels, probabilities)),
        "mcc": float(matthews_corrcoef(labels, decided)),
        "f1": float(f1_score(labels, decided)),
        "precision": float(precision_score(labels, decided, zero_division=0)),
        "recall": float(recall_score(labels, decided)),
        "ece": expected_calibration_error(probabilities, labels),
    }
    by_kind: dict[str, list[bool]] = defaultdict(list)
    for kind, decision in zip(kinds, decided.tolist()):
        by_kind[kind].append(decision if kind == "correct" else not decision)
    metrics["kept"] = float(np.mean(by_kind.pop("correct", [np.nan])))
    for kind, outcomes in sorted(by_kind.items()):
        metrics[f"rejected/{kind}"] = float(np.mean(outcomes))
    for name, scores in (("cosine", cosines), ("margin", margins)):
        if scores is not None:
            metrics[f"{name}/auc"] = float(roc_auc_score(labels, scores))
            threshold = (baseline_thresholds or {}).get(name)
            if threshold is not None:
                metrics[f"{name}/mcc"] = float(matthews_corrcoef(labels, np.asarray(scores) >= threshold))
    return metrics


def evaluate_sets(probabilities: Probabilities, data: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """The metrics (:func:`evaluate_quality`) of the calibration pairs and of every held-out set of ``data``
    (``PreparedData``), with the cosine's and the margin's MCC at their best thresholds on the calibration pairs; and
    each held-out set's (calibrated probabilities, labels), which the card's reliability diagram draws (computed once:
    a cross-encoder's pass over the pairs is the expensive part)."""
    calibration_features = np.asarray(data.calibration["features"])
    calibration_labels = np.asarray(data.calibration["labels"])
    thresholds = {
        name: best_threshold(calibration_features[:, column], calibration_labels)
        for column, name in enumerate(("cosine", "margin"))
    }
    results: dict[str, Any] = {"baseline_thresholds": thresholds}
    predictions: dict[str, Any] = {}
    for name, dataset in {"calibration": data.calibration, **data.eval_sets}.items():
        features = np.asarray(dataset["features"])
        predicted, labels = probabilities(dataset), np.asarray(dataset["labels"])
        if name in data.eval_sets:
            predictions[name] = (predicted, labels)
        results[name] = evaluate_quality(
            predicted,
            labels,
            list(dataset["kind"]),
            cosines=features[:, 0],
            margins=features[:, 1],
            baseline_thresholds=thresholds,
        )
    return results, predictions
