"""Metrics validate their inputs, and MTEB's bitext-mining metrics match a brute-force scikit-learn computation."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import accuracy_score, f1_score, precision_score, recall_score
from test_metrics import noisy_pairs

import bitext_hf.evaluation.metrics as metrics
from bitext_hf.errors import DataValidationError, UsageError
from bitext_hf.evaluation.metrics import functional as F


def brute_mteb(x, y, gold):
    """MTEB's definition with nothing shared with the implementation: a full float64 cosine matrix, argmax."""
    x = x / np.linalg.norm(x.astype(np.float64), axis=1, keepdims=True)
    y = y / np.linalg.norm(y.astype(np.float64), axis=1, keepdims=True)
    predictions = [int(np.argmax(y @ x[i])) for i, _ in gold]
    labels = [j for _, j in gold]
    weighted = dict(average="weighted", zero_division=0)
    return {
        "accuracy": accuracy_score(labels, predictions),
        "precision": precision_score(labels, predictions, **weighted),
        "recall": recall_score(labels, predictions, **weighted),
        "f1": f1_score(labels, predictions, **weighted),
    }


def test_mteb_metrics_by_hand():
    # Source 1 retrieves target 2 instead of 1: labels [0, 1, 2], predictions [0, 2, 2].
    x = np.array([[1, 0, 0], [0.1, 0.2, 1], [0, 0, 1]], dtype=np.float32)
    y = np.eye(3, dtype=np.float32)
    result = F.mteb_bitext_mining(x, y)
    # Per label (precision, recall, F1): 0 -> (1, 1, 1); 1 -> (0, 0, 0), no prediction; 2 -> (1/2, 1, 2/3).
    assert result == pytest.approx(
        {"accuracy": 2 / 3, "precision": 0.5, "recall": 2 / 3, "f1": 5 / 9, "main_score": 5 / 9}
    )


@pytest.mark.parametrize("seed", [0, 1])
def test_mteb_metrics_match_brute_force_sklearn(seed):
    x, y = noisy_pairs(seed, n=80, noise=1.2)
    x, y = x * 3, y * 0.5  # not unit length: cosine needs the normalization
    gold = [(i, i) for i in range(80)]
    expected = brute_mteb(x, y, gold)
    assert 0 < expected["accuracy"] < 1, "the data must make some errors for the test to mean something"
    result = F.mteb_bitext_mining(x, y)
    assert result == pytest.approx({**expected, "main_score": expected["f1"]})
    assert all(0 <= value <= 1 for value in result.values())


def test_mteb_gold_selects_the_queries_and_labels_like_bucc():
    x, y = noisy_pairs(3, n=50, noise=1.0)
    gold = [(7, 7), (3, 3), (40, 40), (12, 12), (3, 3)]  # a subset of sources, in gold order, one repeated
    result = F.mteb_bitext_mining(x[:45], y, gold)  # the pool is larger than the queried sources
    assert result == pytest.approx({**brute_mteb(x, y, gold), "main_score": brute_mteb(x, y, gold)["f1"]})
    assert metrics.load("mteb_bitext_mining").compute(source_embeddings=x, target_embeddings=y) == pytest.approx(
        F.mteb_bitext_mining(x, y)
    )


@pytest.mark.parametrize(
    ("gold", "message"),
    [
        ([(0, 60)], r"pair 0 has target index 60, outside \[0, 50\)"),
        ([(1, 1), (-1, 2)], r"pair 1 has source index -1"),
        ([(1, 1, 1)], "index pairs"),
        ([], "non-empty"),
        ([(0.5, 1)], "integer"),
        ([(0, 1), (2,)], "integer indices of one shape"),
    ],
)
def test_mteb_gold_is_validated(gold, message):
    x, y = noisy_pairs(0, n=50)
    with pytest.raises(DataValidationError, match=message):
        F.mteb_bitext_mining(x, y, gold)


def test_mteb_needs_gold_when_the_sides_differ():
    x, y = noisy_pairs(0, n=20)
    with pytest.raises(DataValidationError, match="translation pair"):
        F.mteb_bitext_mining(x, y[:10])


def test_bucc_labels_beyond_the_gold_count_are_refused_not_a_recall_of_two():
    scores, labels = [0.9, 0.8, 0.7, 0.1], [1, 1, 0, 0]
    with pytest.raises(DataValidationError, match="2 candidates are labelled gold but there are only 1 gold pairs"):
        F.bucc_f1(scores, labels, n_gold_test=1, threshold=0.5)
    with pytest.raises(DataValidationError, match="train split: 2 candidates"):
        F.bucc_f1(scores, labels, train_scores=scores, train_labels=labels, n_gold_train=1)
    with pytest.raises(DataValidationError, match="only 1 gold"):
        F.bucc_optimal_threshold(scores, labels, 1)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (dict(test_scores=[1.0, np.nan], test_labels=[1, 0]), "NaN"),
        (dict(test_scores=[1.0, 2.0], test_labels=[1, 2]), "0/1"),
        (dict(test_scores=[1.0, 2.0], test_labels=[1.0, np.nan]), "0/1"),
        (dict(test_scores=[1.0, 2.0], test_labels=[1, 0], n_gold_test=-3), "whole number >= 0"),
        (dict(test_scores=[1.0, 2.0], test_labels=[1, 0], n_gold_test=2.5), "whole number >= 0"),
        (dict(test_scores=[1.0, 2.0], test_labels=[1, 0], threshold=float("nan")), "finite number"),
        (dict(test_scores=[1.0, 2.0], test_labels=[1, 0], train_scores=[1.0]), "both train_scores"),
        (dict(test_scores=[], test_labels=[]), "no candidate pairs"),
    ],
)
def test_bucc_f1_validates_its_inputs(kwargs, message):
    scores, labels = kwargs.pop("test_scores"), kwargs.pop("test_labels")
    with pytest.raises(DataValidationError, match=message):
        F.bucc_f1(scores, labels, **kwargs)


def test_bucc_oracle_threshold_names_the_test_split():
    with pytest.raises(DataValidationError, match="test split: no gold pairs"):
        F.bucc_f1([1.0, 2.0], [0, 0])


@pytest.mark.parametrize(
    ("results", "message"),
    [
        ([], "at least one"),
        ([{"errors": -1, "n": 10}], "0 <= errors <= n"),
        ([{"errors": 11, "n": 10}], "0 <= errors <= n"),
        ([{"errors": 0, "n": 0}], "n > 0"),
        ([{"errors": float("nan"), "n": 10}], "whole counts"),
        ([{"errors": 1.5, "n": 10}], "whole counts"),
        ([{"xsim": 3.0}], "'errors' and 'n'"),
    ],
)
def test_xsim_micro_average_validates_counts(results, message):
    with pytest.raises(DataValidationError, match=message):
        F.xsim_micro_average(results)
    assert F.xsim_micro_average([{"errors": 1.0, "n": 4.0}])["xsim"] == 25.0, "counts read back from JSON"


def test_xsim_and_accuracy_validate_shapes_gold_and_embeddings():
    x, y = noisy_pairs(0, n=12)
    with pytest.raises(DataValidationError, match="dimension mismatch"):
        F.xsim(x, y[:, :8])
    with pytest.raises(DataValidationError, match=r"one target index in \[0, 12\)"):
        F.xsim(x, y, gold=[0] * 11 + [12])
    with pytest.raises(DataValidationError, match="integer"):
        F.xsim(x, y, gold=[0.5] * 12)
    with pytest.raises(DataValidationError, match="11 entries"):
        F.xsim(x, y, target_texts=["t"] * 11)
    with pytest.raises(DataValidationError, match="aligned rows"):
        F.bitext_accuracy(x, y[:6])
    with pytest.raises(UsageError, match="maximum"):
        F.xsim_from_similarity(np.ones((300, 300)), k=300)
    zero = x.copy()
    zero[4] = 0
    for metric in (F.xsim, F.bitext_accuracy, F.mteb_bitext_mining):
        with pytest.raises(DataValidationError, match="row 4"):
            metric(zero, y)
    scaled = F.xsim(x * 50, y)
    assert scaled == F.xsim(x, y), "unnormalized rows are normalized, not compared by raw inner product"


def test_accuracy_texts_are_validated_and_decide_duplicates():
    x, y = noisy_pairs(0, n=12)
    with pytest.raises(DataValidationError, match=r"target_texts must hold one text per row \(12 rows\), got 11"):
        F.bitext_accuracy(x, y, target_texts=["t"] * 11)
    with pytest.raises(DataValidationError, match=r"source_texts .* got a single string"):
        F.bitext_accuracy(x, y, source_texts="twelve chars")
    # Target 1 repeats target 0's row and text: source 1 retrieves target 0 (the lower index), a hit by its text.
    x, y = np.eye(3, dtype=np.float32), np.array([[1, 0, 0], [1, 0, 0], [0, 0, 1]], dtype=np.float32)
    assert F.bitext_accuracy(x, y)["src2tgt_accuracy"] == pytest.approx(2 / 3)
    assert F.bitext_accuracy(x, y, target_texts=["a", "a", "c"])["src2tgt_accuracy"] == 1.0
