"""Numbers the miner must check: unit rows, unusable rows, the bound on k, and document-level mining per document."""

from __future__ import annotations

import inspect
import logging

import numpy as np
import pytest
from reference import brute_mine
from test_mining import unit

from bitext_hf.errors import DataValidationError, UsageError
from bitext_hf.mining import (
    DEFAULT_MODE,
    MAX_K,
    MinedPairs,
    bidirectional_knn,
    check_embeddings,
    check_k,
    knn_search,
    mine,
    mine_documents,
    score_pairs,
)


@pytest.fixture(scope="module")
def pair():
    rng = np.random.default_rng(11)
    x = unit(rng, 40)
    y = x + 0.5 * unit(rng, 40)
    return x, (y / np.linalg.norm(y, axis=1, keepdims=True)).astype(np.float32)


def warnings_of(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


def test_unnormalized_rows_are_normalized_with_one_warning(pair, caplog):
    x, y = pair
    scale = np.linspace(2, 41, len(x), dtype=np.float32)[:, None]
    with caplog.at_level(logging.WARNING):
        pairs = mine(x * scale, y, k=4)
    assert pairs.as_set() == mine(x, y, k=4).as_set()
    assert pairs.cosines.max() <= 1 + 1e-5, "cosines of unit rows, never 41"
    messages = warnings_of(caplog)
    assert len(messages) == 1 and "40 of 40 rows were not unit length" in messages[0]


def test_values_whose_products_overflow_float32_are_normalized_not_nan(pair):
    x, y = pair
    huge = np.float32(1e30)  # products of 1e30 x 1e30 overflow float32
    pairs = mine(x * huge, y * huge, k=4)
    assert np.isfinite(pairs.scores).all() and pairs.as_set() == mine(x, y, k=4).as_set()
    scores = score_pairs(x * huge, y * huge, k=4)
    np.testing.assert_allclose(scores, score_pairs(x, y, k=4), rtol=1e-5)


def test_rows_within_float_rounding_of_unit_length_are_used_without_a_copy_or_warning(pair, tmp_path, caplog):
    x, _ = pair
    np.save(tmp_path / "x.npy", x)
    mapped = np.load(tmp_path / "x.npy", mmap_mode="r")
    with caplog.at_level(logging.WARNING):
        checked = check_embeddings(mapped, "x.npy")
    assert np.shares_memory(checked, mapped) and not warnings_of(caplog)
    slightly_off = check_embeddings(x * np.float32(1.0001), "x")  # silently renormalized
    np.testing.assert_allclose(np.linalg.norm(slightly_off, axis=1), 1, atol=1e-6)
    assert not warnings_of(caplog)


def test_memory_mapped_unnormalized_input_is_normalized_blockwise(tmp_path, monkeypatch):
    import bitext_hf.data.embeddings as embeddings

    monkeypatch.setattr(embeddings, "_CHECK_BLOCK_ELEMENTS", 16 * 3)  # blocks of 3 rows
    x = np.random.default_rng(0).standard_normal((10, 16)).astype(np.float64) * 7
    np.save(tmp_path / "x.npy", x)
    checked = check_embeddings(np.load(tmp_path / "x.npy", mmap_mode="r"), "x.npy")
    assert checked.dtype == np.float32 and checked.flags.c_contiguous
    np.testing.assert_allclose(checked, x / np.linalg.norm(x, axis=1, keepdims=True), rtol=1e-6)


@pytest.mark.parametrize(
    ("row", "message"),
    [
        (np.zeros(24, np.float32), r"x\.npy: row 2 \(0-based\) is all zeros"),
        (np.full(24, np.nan, np.float32), r"x\.npy: 1 row\(s\) contain NaN or inf \(first: row 2"),
        (np.full(24, 1e300, np.float64), r"x\.npy: .*overflow even in float64 \(first: row 2"),
        (np.full(24, 1e-200, np.float64), r"x\.npy: row 2 \(0-based\) has values too small to normalize"),
    ],
)
def test_unusable_rows_are_data_errors_naming_the_row(pair, row, message):
    x = pair[0].astype(row.dtype)
    x[2] = row
    with pytest.raises(DataValidationError, match=message):
        check_embeddings(x, "x.npy")
    with pytest.raises(DataValidationError):
        mine(x, pair[1])


def test_every_entry_point_refuses_an_all_zero_row(pair):
    x, y = pair
    zero = x.copy()
    zero[5] = 0
    for call in (
        lambda: mine(zero, y),
        lambda: score_pairs(zero, y),
        lambda: mine_documents(zero, y, [0] * len(x), [0] * len(y)),
        lambda: knn_search(zero, y, 2),
        lambda: bidirectional_knn(zero, y, 2),
    ):
        with pytest.raises(DataValidationError, match="row 5"):
            call()


def test_knn_search_is_cosine_by_default_and_raw_inner_product_on_request(pair):
    x, y = pair
    sims, _ = knn_search(x * 3, y * 5, 1)
    assert sims.max() <= 1 + 1e-5
    raw, _ = knn_search(x * 3, y * 5, 1, normalize=False)
    np.testing.assert_allclose(raw, sims * 15, rtol=1e-5)
    with pytest.raises(DataValidationError, match="overflow float32"):
        knn_search(x * np.float32(1e20), y, 1, normalize=False)


def test_k_above_the_bound_is_a_usage_error_that_says_the_cost(pair):
    with pytest.raises(UsageError, match=rf"k=5000 is above the maximum of {MAX_K}.*about 572 MiB"):
        check_k(5000, 5000, 5000)
    for bad in (0, -1, 2.5, True):
        with pytest.raises(UsageError, match="integer >= 1"):
            check_k(bad, 10, 10)
    check_k(5000, 100, 200)  # capped at the corpus sizes: cheap
    x, y = pair
    rng = np.random.default_rng(1)
    big_x, big_y = unit(rng, MAX_K + 1), unit(rng, MAX_K + 1)
    for call in (
        lambda: mine(big_x, big_y, k=MAX_K + 1),
        lambda: score_pairs(big_x, big_y, k=MAX_K + 1),
        lambda: mine_documents(big_x, big_y, [0] * (MAX_K + 1), [0] * (MAX_K + 1), k=MAX_K + 1),
        lambda: mine(x, y, k=0),
    ):
        with pytest.raises(UsageError):
            call()
    # Documents cap k: the same k is fine when no document is that large.
    docs = [i % 2 for i in range(MAX_K + 1)]
    assert len(mine_documents(big_x, big_y, docs, docs, k=MAX_K + 1))


def test_one_default_mode_max():
    assert DEFAULT_MODE == "max"
    for function in (mine, mine_documents):
        assert inspect.signature(function).parameters["mode"].default == DEFAULT_MODE


def test_document_mining_defaults_to_max_and_reports_document_ids(pair):
    x, y = pair
    docs = np.array(["a", "b"] * 20)
    pairs = mine_documents(x, y, docs, docs)
    expected = {}
    for doc in ("a", "b"):
        rows = np.flatnonzero(docs == doc)
        for (i, j), s in brute_mine(x[rows], y[rows], 4, "ratio", "max").items():
            expected[(int(rows[i]), int(rows[j]))] = s
    assert pairs.as_set() == set(expected)
    assert pairs.doc_ids is not None and (pairs.doc_ids == docs[pairs.src_indices]).all()
    assert (pairs.doc_ids == docs[pairs.tgt_indices]).all()
    assert list(pairs.select(slice(3)).doc_ids) == list(pairs.doc_ids[:3])
    assert (pairs.sorted().doc_ids == pairs.doc_ids).all()
    assert mine_documents(x, y, ["a"] * 40, ["b"] * 40).doc_ids.shape == (0,)


def test_a_sentence_repeated_in_two_documents_is_mined_in_both(pair):
    x, y = pair
    # Source rows 0 and 1 are the same sentence, in documents A and B; row 2 repeats row 0 inside document A.
    src, tgt = x[:6].copy(), y[:6].copy()
    src[1] = src[2] = src[0]
    tgt[1] = tgt[0]
    src_keys, tgt_keys = ["s", "s", "s", "u", "v", "w"], ["t", "t", "x", "y", "z", "q"]
    src_docs, tgt_docs = ["A", "B", "A", "A", "B", "B"], ["A", "B", "A", "A", "B", "B"]
    pairs = mine_documents(src, tgt, src_docs, tgt_docs, src_keys=src_keys, tgt_keys=tgt_keys, k=2)
    found = {(doc, s, t) for s, t, doc in zip(pairs.src_indices, pairs.tgt_indices, pairs.doc_ids)}
    assert ("A", 0, 0) in found and ("B", 1, 1) in found, "the repeated sentence is found in both documents"
    assert 2 not in pairs.src_indices, "inside document A the repeat is mined once, at its first row"
    with pytest.raises(DataValidationError, match="one key per sentence"):
        mine_documents(src, tgt, src_docs, tgt_docs, src_keys=src_keys[:-1])


def test_concatenate_keeps_document_ids_and_refuses_a_mix():
    with_docs = MinedPairs(np.array([0]), np.array([1]), np.array([1.0]), np.array([0.5]), np.array(["d"]))
    both = MinedPairs.concatenate([with_docs, with_docs])
    assert list(both.doc_ids) == ["d", "d"]
    assert MinedPairs.concatenate([MinedPairs.empty()]).doc_ids is None
    with pytest.raises(ValueError, match="document ids"):
        MinedPairs.concatenate([with_docs, MinedPairs.empty()])


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (dict(threshold=float("nan")), "finite number"),
        (dict(threshold=float("inf")), "finite number"),
        (dict(threshold="0.5"), "finite number"),
        (dict(mode="best"), "retrieval mode"),
        (dict(margin="cosine"), "unknown margin"),
    ],
)
def test_settings_are_usage_errors_before_any_work(pair, monkeypatch, settings, message):
    import bitext_hf.mining as mining
    import bitext_hf.mining.documents as documents

    def no_search(*args, **kwargs):
        raise AssertionError("the neighbour search ran before the settings were checked")

    monkeypatch.setattr(mining, "search_neighbours_unchecked", no_search)
    monkeypatch.setattr(documents, "search_neighbours_unchecked", no_search)
    x, y = pair
    with pytest.raises(UsageError, match=message):
        mining.mine(x, y, **settings)
    with pytest.raises(UsageError, match=message):
        mining.mine_documents(x, y, [0] * len(x), [0] * len(y), **settings)


def test_mining_leaves_torchs_thread_count_as_the_caller_set_it():
    """numba's OpenMP layer reset torch's thread count: training after a retrieval evaluation ran 4-10x slower."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        x = np.random.default_rng(0).normal(size=(300, 8)).astype(np.float32)
        mine(x, x.copy(), k=4)
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)
