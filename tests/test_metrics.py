"""Metrics against brute-force references (tests/reference.py) on random and real data, and the evaluate modules."""

from __future__ import annotations

import numpy as np
import pytest
from realdata import demo_aligned
from reference import brute_accuracy, brute_best_f1, brute_xsim

import bitext_hf.evaluation.metrics as metrics
from bitext_hf.evaluation.metrics import functional as F


def noisy_pairs(seed: int, n: int = 120, d: int = 16, noise: float = 0.9):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, d)).astype(np.float32)
    y = x + noise * rng.standard_normal((n, d)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True), y / np.linalg.norm(y, axis=1, keepdims=True)


@pytest.mark.parametrize("margin", ["ratio", "distance", "absolute"])
@pytest.mark.parametrize("k", [1, 4, 10])
def test_xsim_matches_brute_force_on_random_data(margin, k):
    x, y = noisy_pairs(k)
    result = F.xsim(x, y, k=k, margin=margin)
    errors, n = brute_xsim(x, y, k, margin)
    assert 0 < errors < n, "the data must make some errors for the test to mean something"
    assert result == {"xsim": pytest.approx(100 * errors / n), "errors": errors, "n": n}


@pytest.mark.parametrize("margin", ["ratio", "absolute"])
def test_xsim_matches_brute_force_on_real_data(margin):
    x, y, _, de = demo_aligned()
    errors, n = brute_xsim(x, y, 4, margin)
    assert F.xsim(x, y, k=4, margin=margin) == {"xsim": pytest.approx(100 * errors / n), "errors": errors, "n": n}
    assert F.xsim(x, y, k=4, margin=margin, target_texts=de)["errors"] == brute_xsim(x, y, 4, margin, de)[0]


def test_xsim_text_mode_does_not_count_duplicate_targets():
    x, y = noisy_pairs(0, n=40, noise=0.01)
    y[5] = y[6]  # two identical target sentences: retrieving either is right in text mode
    texts = [f"t{i}" for i in range(40)]
    texts[5] = texts[6]
    x[5] = y[6]
    assert F.xsim(x, y, k=4, margin="absolute")["errors"] >= 1
    assert F.xsim(x, y, k=4, margin="absolute", target_texts=texts)["errors"] == 0


def test_xsim_from_similarity_agrees_with_embeddings():
    x, y = noisy_pairs(5)
    assert F.xsim_from_similarity(x @ y.T, k=4) == F.xsim(x, y, k=4)


def test_xsim_micro_average_weights_by_examples():
    result = F.xsim_micro_average([{"errors": 1, "n": 10}, {"errors": 9, "n": 90}, {"errors": 0, "n": 100}])
    assert result == {"xsim": pytest.approx(5.0), "errors": 10, "n": 200}


def test_accuracy_matches_brute_force_on_random_and_real_data():
    for x, y in (noisy_pairs(2), demo_aligned()[:2]):
        src2tgt, tgt2src = brute_accuracy(x, y)
        result = F.bitext_accuracy(x, y)
        assert result["src2tgt_accuracy"] == pytest.approx(src2tgt)
        assert result["tgt2src_accuracy"] == pytest.approx(tgt2src)
        assert result["accuracy"] == pytest.approx((src2tgt + tgt2src) / 2)
    assert F.bitext_accuracy(*demo_aligned()[:2])["accuracy"] > 0.85


def test_accuracy_ties_go_to_the_lowest_index_like_argmax():
    x = np.eye(3, dtype=np.float32)
    y = np.array([[1, 0, 0], [1, 0, 0], [0, 0, 1]], dtype=np.float32)  # row 1 duplicates row 0
    assert F.bitext_accuracy(x, y)["src2tgt_accuracy"] == pytest.approx(brute_accuracy(x, y)[0])


def test_bucc_threshold_is_f1_optimal_and_a_midpoint():
    rng = np.random.default_rng(4)
    labels = rng.random(300) < 0.3
    scores = np.where(labels, rng.normal(1.2, 0.1, 300), rng.normal(1.0, 0.1, 300)).round(3)
    n_gold = int(labels.sum()) + 10  # ten gold pairs were never proposed as candidates
    threshold = F.bucc_optimal_threshold(scores, labels, n_gold)
    result = F.bucc_f1(scores, labels, n_gold_test=n_gold, threshold=threshold)
    assert result["f1"] == pytest.approx(brute_best_f1(scores.tolist(), labels.tolist(), n_gold))
    assert threshold not in set(scores.tolist()), "the threshold lies between two scores"


def test_bucc_threshold_from_train_is_applied_to_test():
    train_scores, train_labels = np.array([3.0, 2.0, 1.0, 0.5]), np.array([1, 1, 0, 0])
    test_scores, test_labels = np.array([2.6, 1.4, 1.6, 0.1]), np.array([1, 0, 1, 0])
    result = F.bucc_f1(test_scores, test_labels, train_scores=train_scores, train_labels=train_labels)
    assert result["threshold"] == pytest.approx(1.5)
    assert (result["precision"], result["recall"]) == (pytest.approx(1.0), pytest.approx(1.0))


def test_bucc_rejects_mismatched_inputs():
    with pytest.raises(ValueError, match="scores but"):
        F.bucc_f1([1.0, 2.0], [1])
    with pytest.raises(ValueError, match="no gold"):
        F.bucc_optimal_threshold([1.0, 2.0], [0, 0])


def test_bucc_labels_from_ids():
    labels, n_gold = F.bucc_labels([("a", "x"), ("b", "y")], [("a", "x"), ("c", "z")])
    assert labels.tolist() == [True, False] and n_gold == 2


def test_evaluate_modules_load_offline_and_agree(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    x, y = noisy_pairs(9, n=60)
    xsim = metrics.load("xsim")
    assert xsim.compute(source_embeddings=x, target_embeddings=y, k=4, margin="distance") == F.xsim(
        x, y, k=4, margin="distance"
    )
    accuracy = metrics.load("bitext_accuracy").compute(source_embeddings=x, target_embeddings=y)
    assert accuracy == pytest.approx(F.bitext_accuracy(x, y))
    scores, labels = [3.0, 2.0, 1.0, 2.6, 1.4, 1.6], [1, 1, 0, 1, 0, 1]
    splits = ["train"] * 3 + ["test"] * 3
    bucc = metrics.load("bucc_f1").compute(scores=scores, labels=labels, splits=splits)
    assert bucc == pytest.approx(F.bucc_f1(scores[3:], labels[3:], train_scores=scores[:3], train_labels=labels[:3]))


def test_unknown_metric_name():
    with pytest.raises(ValueError, match="available"):
        metrics.load("bleu")


def test_xsim_rejects_unaligned_without_gold():
    x, y = noisy_pairs(1, n=10)
    with pytest.raises(ValueError, match="translation pair"):
        F.xsim(x, y[:5])
