"""Approximate search for mining (``bitext_hf.mining.index``): the "auto" choice, IVF searches against the exact
engine, factory-string and dimension errors, recall checks, and the ``mine --index`` options end to end."""

from __future__ import annotations

import numpy as np
import pytest
from cli_fakes import run

from bitext_hf.cli import EXIT_DATA, EXIT_OK, EXIT_USAGE
from bitext_hf.errors import DataValidationError, UsageError
from bitext_hf.mining import check_recall, choose_index, mine, mine_documents, recall_at_k, score_pairs
from bitext_hf.mining.index import (
    AUTO_NPROBE,
    AUTO_PROBED_SHARE,
    EXACT_MAX_PAIRS,
    auto_nprobe,
    check_index,
    resolve_index,
    search_neighbours,
)
from bitext_hf.mining.knn import bidirectional_knn


def planted(n: int, dim: int = 32, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Random unit rows; half of the targets are noisy copies of sources (shuffled), the rest distractors."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, dim)).astype(np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    y = rng.standard_normal((n, dim)).astype(np.float32)
    y[: n // 2] = x[: n // 2] + 0.3 * y[: n // 2] / np.sqrt(dim)
    y /= np.linalg.norm(y, axis=1, keepdims=True)
    return x, y[rng.permutation(n)]


# ----------------------------------------------------------------------------------------------- the auto choice


def test_auto_is_exact_while_the_corpus_has_few_pairs_whatever_the_dimension():
    assert choose_index(1000, 1000, 768).exact
    side = int(np.sqrt(EXACT_MAX_PAIRS))
    for dim in (64, 256, 768, 1024):  # where an index pays depends on N x M only
        assert choose_index(side, side, dim).exact
        assert not choose_index(side + 1000, side + 1000, dim).exact
    assert choose_index(EXACT_MAX_PAIRS // 1000, 1000, 768).exact  # pairs, not the larger side, decide
    assert not choose_index(EXACT_MAX_PAIRS // 1000 + 1, 1000, 768).exact


def test_auto_picks_ivf_flat_with_lists_growing_with_size_then_opq_pq():
    mid, large = choose_index(200_000, 200_000, 768), choose_index(800_000, 800_000, 768)
    assert mid.factory == "IVF2048,Flat" and mid.nprobe == 96  # 3/64 of its lists: 99.5% kept there, 64 kept 98.8%
    nlist = lambda spec: int(spec.factory.split("IVF")[1].split(",")[0])  # noqa: E731
    assert nlist(large) > nlist(mid) and nlist(mid) & (nlist(mid) - 1) == 0  # grows; a power of two
    huge = choose_index(5_000_000, 5_000_000, 768)  # 15 GB of float32 a side: compressed
    assert huge.factory.startswith("OPQ64,IVF") and huge.factory.endswith(",PQ64") and nlist(huge) > nlist(large)
    assert choose_index(10_000_000, 10_000_000, 300).factory.startswith("OPQ64_256,IVF")  # 300 is not a multiple of 64
    for spec in (mid, large, huge, choose_index(10_000_000, 10_000_000, 300)):
        check_index(spec.factory, 768 if "OPQ64_" not in spec.factory else 300)  # valid FAISS strings


def test_auto_nprobe_scans_64_lists_and_at_least_a_fixed_share():
    assert [auto_nprobe(nlist) for nlist in (16, 64, 512, 1024, 2048, 4096)] == [16, 64, 64, 64, 96, 192]
    assert AUTO_NPROBE == 64 and AUTO_PROBED_SHARE == 3 / 64
    # Above auto's exact bound no index scans a larger share of its lists than the one at the bound.
    at_bound = choose_index(80_001, 80_001, 768)
    bound_share = at_bound.nprobe / int(at_bound.factory.split("IVF")[1].split(",")[0])
    for side in (100_000, 200_000, 1_000_000, 5_000_000):
        spec = choose_index(side, side, 768)
        assert spec.nprobe / int(spec.factory.split("IVF")[1].split(",")[0]) <= bound_share
    # A factory without nprobe scans what auto would scan in as many lists; an explicit one is kept (capped).
    assert resolve_index("IVF4096,Flat", 300_000, 300_000, 64).nprobe == 192
    assert resolve_index("IVF4096,Flat", 300_000, 300_000, 64, nprobe=7).nprobe == 7


def test_auto_with_an_explicit_nprobe_keeps_it():
    assert resolve_index("auto", 200_000, 200_000, 768, nprobe=5).nprobe == 5
    assert resolve_index("auto", 100, 100, 768, nprobe=5).exact
    assert resolve_index("auto", 200_000, 200_000, 768, nprobe=10**6).nprobe == 2048  # at most the lists


def test_gpu_path_falls_back_to_the_cpu_when_faiss_cannot_move_the_index(monkeypatch, caplog):
    import faiss

    import bitext_hf.mining.index as index_module

    def refuse(index):
        raise RuntimeError("not supported on GPU\nC++ trace")

    monkeypatch.setattr(index_module, "_gpu_available", lambda: True)
    monkeypatch.setattr(faiss, "index_cpu_to_all_gpus", refuse, raising=False)
    x, y = planted(600)
    with caplog.at_level("WARNING"):
        pairs = mine(x, y, index="IVF8,Flat", nprobe=8)
    assert pairs.as_set() == mine(x, y).as_set()
    assert "cannot put this index on the GPU (not supported on GPU); using the CPU" in caplog.text


# ---------------------------------------------------------------------------------------- against exact search


def test_ivf_scanning_every_list_equals_exact():
    x, y = planted(1500)
    exact = mine(x, y, k=4)
    approx = mine(x, y, k=4, index="IVF16,Flat", nprobe=16)
    assert approx.as_set() == exact.as_set()
    order_a, order_e = (
        np.lexsort((approx.tgt_indices, approx.src_indices)),
        np.lexsort((exact.tgt_indices, exact.src_indices)),
    )
    np.testing.assert_allclose(approx.scores[order_a], exact.scores[order_e], rtol=1e-5)
    np.testing.assert_allclose(score_pairs(x, y, index="IVF16,Flat", nprobe=16), score_pairs(x, y), rtol=1e-5)


def test_few_probes_miss_neighbours_but_scores_stay_exact_cosines_and_runs_repeat():
    x, y = planted(1500)
    knn = search_neighbours(x, y, 4, index="IVF16,Flat", nprobe=1)
    again = search_neighbours(x, y, 4, index="IVF16,Flat", nprobe=1)
    np.testing.assert_array_equal(knn.forward_indices, again.forward_indices)  # seeded training: reproducible
    exact = bidirectional_knn(x, y, 4)
    assert (knn.forward_indices != exact.forward_indices).any()
    cosines = np.einsum("id,ikd->ik", x, y[knn.forward_indices])
    np.testing.assert_allclose(knn.forward_sims, cosines, rtol=1e-5, atol=1e-6)
    assert (np.diff(knn.forward_sims, axis=1) <= 0).all() and (np.diff(knn.backward_sims, axis=1) <= 0).all()


def test_queries_whose_cells_hold_fewer_than_k_vectors_are_searched_exactly():
    x, y = planted(120, dim=8)
    knn = search_neighbours(x, y, 50, index="IVF4,Flat", nprobe=1)  # a cell holds ~30 of 120 vectors
    assert (knn.forward_indices >= 0).all() and (knn.backward_indices >= 0).all()
    assert all(len(set(row)) == 50 for row in knn.forward_indices.tolist())


def test_compressed_index_is_rescored_exactly():
    x, y = planted(1200)
    knn = search_neighbours(x, y, 4, index="IVF8,SQ8", nprobe=8)
    cosines = np.einsum("id,ikd->ik", x, y[knn.forward_indices])
    np.testing.assert_allclose(knn.forward_sims, cosines, rtol=1e-5, atol=1e-6)
    exact = mine(x, y, threshold=1.5)  # the planted pairs
    assert len(mine(x, y, index="IVF8,SQ8", nprobe=8, threshold=1.5).as_set() & exact.as_set()) >= 0.99 * len(exact)


def test_opq_trains_a_rougher_rotation_and_its_pairs_are_rescored_exactly():
    import faiss

    from bitext_hf.mining.index import OPQ_ITERATIONS, IndexSpec, train_index

    x, y = planted(1200)
    trained = train_index(IndexSpec("OPQ8,IVF8,PQ8", 8), x, y, 0, use_gpu=False)
    rotation = faiss.downcast_VectorTransform(trained.chain.at(0))
    assert isinstance(rotation, faiss.OPQMatrix) and rotation.niter == OPQ_ITERATIONS < 50  # FAISS's default
    exact = mine(x, y, threshold=1.5)
    approx = mine(x, y, index="OPQ8,IVF8,PQ8", nprobe=8, threshold=1.5)
    assert len(approx.as_set() & exact.as_set()) >= 0.99 * len(exact)


# --------------------------------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("index", "dim", "nprobe", "message"),
    [
        ("IVF16,Bogus", 32, None, "is not a FAISS factory string for dimension 32"),
        ("PQ7", 32, None, "for dimension 32"),  # 32 is not a multiple of 7
        ("Flat", 32, 4, "has no inverted lists"),
        ("exact", 32, 4, "not to index 'exact'"),
        ("auto", 32, 0, "nprobe must be an integer >= 1"),
        ("", 32, None, "index must be 'exact', 'auto' or a FAISS factory string"),
    ],
)
def test_unusable_index_is_one_usage_error(index, dim, nprobe, message):
    with pytest.raises(UsageError) as error:
        check_index(index, dim, nprobe)
    assert message in str(error.value) and "\n" not in str(error.value)


def test_more_lists_than_sentences_is_refused_before_training():
    x, y = planted(20)
    with pytest.raises(UsageError, match="has 64 lists but there are only 40 sentences"):
        mine(x, y, index="IVF64,Flat")


def test_dimension_mismatch_is_named_before_any_index():
    x, _ = planted(100, dim=32)
    _, y = planted(100, dim=48)
    with pytest.raises(DataValidationError, match="dimension mismatch: source embeddings has dimension 32"):
        mine(x, y, index="IVF4,Flat")


def test_documents_take_exact_or_auto_only():
    x, y = planted(40)
    docs = [0] * 20 + [1] * 20
    with pytest.raises(UsageError, match="document-level mining takes index 'exact' or 'auto'"):
        mine_documents(x, y, docs, docs, index="IVF4,Flat")
    assert mine_documents(x, y, docs, docs, index="auto").as_set() == mine_documents(x, y, docs, docs).as_set()


# ------------------------------------------------------------------------------------------------------ recall


def test_recall_is_one_for_exact_neighbours_and_below_one_for_a_single_probe():
    x, y = planted(1500)
    assert recall_at_k(x, y, bidirectional_knn(x, y, 4), queries=100).recall == 1.0
    full = check_recall(x, y, index="IVF16,Flat", nprobe=16, queries=200)
    assert full.recall == 1.0 and full.queries == 200 and full.k == 4
    one = check_recall(x, y, index="IVF16,Flat", nprobe=1, queries=200, seed=3)
    assert 0 < one.recall < 0.9
    assert str(one).startswith("recall@4 ") and "on 200 sampled sources (IVF16,Flat (nprobe 1) vs exact" in str(one)
    with pytest.raises(UsageError, match="recall queries must be an integer >= 1"):
        check_recall(x, y, index="IVF16,Flat", queries=0)


# --------------------------------------------------------------------------------------------------------- CLI


def _npy_pair(tmp_path, n: int = 1500, dims: tuple[int, int] = (32, 32)) -> tuple[str, str]:
    x, _ = planted(n, dims[0])
    _, y = planted(n, dims[1]) if dims[1] != dims[0] else planted(n, dims[0])
    np.save(tmp_path / "src.npy", x)
    np.save(tmp_path / "tgt.npy", y)
    return str(tmp_path / "src.npy"), str(tmp_path / "tgt.npy")


def test_cli_ivf_scanning_every_list_writes_the_exact_pairs_and_reports_recall(capsys, tmp_path):
    src, tgt = _npy_pair(tmp_path)
    code, _, _ = run(capsys, "mine", "--src", src, "--tgt", tgt, "--out", str(tmp_path / "exact.tsv"), "-q")
    assert code == EXIT_OK
    code, out, err = run(
        capsys,
        "mine",
        "--src",
        src,
        "--tgt",
        tgt,
        "--out",
        "-",
        "-q",
        "--index",
        "IVF16,Flat",
        "--nprobe",
        "16",
        "--check-recall",
        "100",
    )
    assert code == EXIT_OK
    exact = (tmp_path / "exact.tsv").read_text().splitlines()
    approx = out.splitlines()
    assert len(exact) > 700 and approx[0] == exact[0]
    assert {tuple(line.split("\t")[1:3]) for line in approx[1:]} == {
        tuple(line.split("\t")[1:3]) for line in exact[1:]
    }
    assert "recall@4 1.0000 on 100 sampled sources (IVF16,Flat (nprobe 16) vs exact search)" in err


def test_cli_check_recall_reads_the_runs_own_neighbours_and_the_sidecar_names_the_index(capsys, tmp_path, monkeypatch):
    import json

    from bitext_hf.mining import index as index_module

    src, tgt = _npy_pair(tmp_path)
    trained = []
    real_train = index_module.train_index
    monkeypatch.setattr(index_module, "train_index", lambda *a, **kw: trained.append(a[0]) or real_train(*a, **kw))
    out = tmp_path / "pairs.tsv"
    code, report, err = run(
        capsys,
        "mine",
        "--src",
        src,
        "--tgt",
        tgt,
        "--out",
        str(out),
        "-q",
        "--index",
        "IVF16,Flat",
        "--nprobe",
        "4",
        "--check-recall",
        "200",
    )
    assert code == EXIT_OK, err
    assert len(trained) == 1  # the run's index only: recall@k is read from its neighbours, no second index
    assert "on 200 sampled sources (IVF16,Flat (nprobe 4) vs exact search)" in report
    sidecar = json.loads((tmp_path / "pairs.tsv.meta.json").read_text(encoding="utf-8"))
    assert sidecar["index"] == "IVF16,Flat (nprobe 4)"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--index", "IVF16,Nope"], "is not a FAISS factory string for dimension 32"),
        (["--index", "PQ5"], "for dimension 32"),
        (["--index", "IVF4096,Flat"], "has 4096 lists but there are only 3000 sentences"),
        (["--nprobe", "4"], "not to index 'exact'"),
        (["--check-recall", "10"], "--check-recall compares an approximate --index"),
    ],
)
def test_cli_bad_index_options_are_one_line_exit_2_without_output(capsys, tmp_path, options, message):
    src, tgt = _npy_pair(tmp_path)
    out = tmp_path / "pairs.tsv"
    code, _, err = run(capsys, "mine", "--src", src, "--tgt", tgt, "--out", str(out), *options)
    assert code == EXIT_USAGE and message in err and len(err.strip().splitlines()) == 1
    assert not out.exists()


def test_cli_dimension_mismatch_with_an_index_is_one_line_exit_3(capsys, tmp_path):
    src, tgt = _npy_pair(tmp_path, n=200, dims=(32, 48))
    code, _, err = run(capsys, "mine", "--src", src, "--tgt", tgt, "--index", "IVF4,Flat")
    assert code == EXIT_DATA and "has dimension 32 but" in err and len(err.strip().splitlines()) == 1


def test_search_neighbours_validates_both_sides_and_their_dimension():
    from bitext_hf.mining.index import search_neighbours

    rng = np.random.default_rng(0)
    with pytest.raises(DataValidationError, match="dimension mismatch"):
        search_neighbours(rng.normal(size=(8, 4)), rng.normal(size=(8, 5)), 2)
    with pytest.raises(DataValidationError, match="source embeddings"):
        search_neighbours(np.full((8, 4), np.nan), rng.normal(size=(8, 4)), 2)
