"""BUCC F1 as a local `evaluate` metric: threshold optimised on one split, applied to another."""

from __future__ import annotations

import datasets
import evaluate
import numpy as np

from bitext_hf.evaluation.metrics.functional import bucc_f1, check_labels

_DESCRIPTION = """
BUCC bitext-mining F1. Each input row is one scored candidate pair with its gold label and split ("train" or
"test"). The threshold is swept over the sorted train scores and the F1-best one (the midpoint between neighbouring
scores) is applied to the test candidates (score >= threshold). Without train rows, the threshold is optimised on the
test split itself (an oracle). Gold pairs that are not among the candidates count against recall through
``n_gold_train`` / ``n_gold_test``.
"""

_KWARGS_DESCRIPTION = """
Args:
    scores (list of float): candidate pair scores (e.g. margin scores from `bitext_hf.mining`).
    labels (list of int or bool): 1 (True) if the candidate is a gold pair, else 0 (False); any other value is a
        ValueError naming it.
    splits (list of str): "train" or "test" per candidate.
    n_gold_train (int, optional), n_gold_test (int, optional): number of gold pairs per split.
    threshold (float, optional): use this threshold instead of optimising one.
Returns:
    precision, recall, f1 (floats in [0, 1]) on the test split and the threshold.
Examples:
    >>> metric = evaluate.load(str(bitext_hf.evaluation.metrics.metric_path("bucc_f1")))  # or its hub id
    >>> metric.compute(scores=s, labels=l, splits=sp, n_gold_test=2000)
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class BuccF1(evaluate.Metric):
    def _info(self) -> evaluate.MetricInfo:
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation="",
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features(
                {
                    "scores": datasets.Value("float64"),
                    # float64, not int32: an int32 feature would truncate 0.5 to 0 before _compute could refuse it
                    "labels": datasets.Value("float64"),
                    "splits": datasets.Value("string"),
                }
            ),
        )

    def _compute(self, scores, labels, splits, n_gold_train=None, n_gold_test=None, threshold=None):
        # Every label is checked, of both splits, before anything is booleanized: astype(bool) reads 2 or -1 as gold.
        scores, labels, splits = np.asarray(scores), check_labels(labels), np.asarray(splits)
        unknown = set(np.unique(splits).tolist()) - {"train", "test"}
        if unknown:
            raise ValueError(f"splits must be 'train' or 'test', got {sorted(unknown)}")
        train, test = splits == "train", splits == "test"
        return bucc_f1(
            scores[test],
            labels[test],
            n_gold_test=n_gold_test,
            train_scores=scores[train] if train.any() else None,
            train_labels=labels[train] if train.any() else None,
            n_gold_train=n_gold_train,
            threshold=threshold,
        )
