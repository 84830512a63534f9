"""The mining engine against the brute-force definitions (tests/reference.py), on random and real embeddings."""

from __future__ import annotations

import numpy as np
import pytest
from realdata import demo_embeddings, demo_texts
from reference import brute_margin, brute_mine, brute_neighbourhoods

from bitext_hf.mining import (
    MARGINS,
    MODES,
    MinedPairs,
    bidirectional_knn,
    knn_search,
    mine,
    mine_documents,
    score_pairs,
    vote,
    write_pairs,
)


def unit(rng, n, d=24):
    x = rng.standard_normal((n, d)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


@pytest.fixture(scope="module")
def random_pair():
    rng = np.random.default_rng(7)
    x = unit(rng, 90)
    # half of the sources have a noisy translation among the targets, the rest are distractors
    y = np.concatenate([x[:45] + 0.3 * unit(rng, 45), unit(rng, 30)])
    y /= np.linalg.norm(y, axis=1, keepdims=True)
    return x, y[rng.permutation(len(y))]


def assert_same_pairs(pairs: MinedPairs, reference: dict, atol=1e-5):
    got = {(i, j): s for i, j, s in pairs}
    assert set(got) == set(reference)
    for key, score in reference.items():
        assert got[key] == pytest.approx(score, abs=atol)
    assert np.all(np.diff(pairs.scores) <= 0), "pairs are sorted by decreasing score"


@pytest.mark.parametrize("backend", ["fused", "torch"])
@pytest.mark.parametrize("block_elements", [1 << 26, 64 * 7, 97])
def test_bidirectional_knn_matches_brute_force_across_blocks(random_pair, block_elements, backend):
    x, y = random_pair
    result = bidirectional_knn(x, y, 5, block_elements=block_elements, backend=backend)
    sim, fwd, bwd, _, _ = brute_neighbourhoods(x, y, 5)
    np.testing.assert_array_equal(result.forward_indices, fwd)
    np.testing.assert_array_equal(result.backward_indices, bwd)
    np.testing.assert_allclose(result.forward_sims, np.take_along_axis(sim, fwd, 1), atol=1e-5)
    np.testing.assert_allclose(result.backward_sims, np.take_along_axis(sim.T, bwd, 1), atol=1e-5)


def test_fused_backend_keeps_the_lower_index_on_ties():
    x = np.eye(3, dtype=np.float32)
    y = np.array([[1, 0, 0], [1, 0, 0], [0, 1, 0], [0, 1, 0]], dtype=np.float32)
    result = bidirectional_knn(x, y, 1, backend="fused")
    assert result.forward_indices[:, 0].tolist()[:2] == [0, 2]
    assert result.backward_indices[:, 0].tolist() == [0, 0, 1, 1]


def test_the_fused_backend_asked_without_a_device_runs_on_the_cpu_where_cuda_is(monkeypatch):
    # On a GPU machine the default device is CUDA; the fused sweep is a CPU backend and must not be refused there.
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    x = np.eye(3, dtype=np.float32)
    assert bidirectional_knn(x, x, 1, backend="fused").forward_indices[:, 0].tolist() == [0, 1, 2]


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize(("rows", "cols", "k"), [(257, 1031, 5), (100, 1024, 4), (64, 33, 4), (1000, 129, 16)])
def test_grouped_top_k_equals_torch_top_k(rows, cols, k, dtype):
    """The torch path's top-k by group maxima gives torch.topk's values exactly, shapes with a partial last group
    and too few groups included, with ties (duplicate rows and columns); indices point at those values."""
    import torch

    from bitext_hf.mining.knn import column_topk, row_topk

    sims = torch.randn(rows, cols, generator=torch.Generator().manual_seed(rows + cols)).to(getattr(torch, dtype))
    sims[:, 7], sims[5] = sims[:, 3], sims[2]
    values, indices = row_topk(sims, k)
    assert torch.equal(values, sims.topk(k, dim=1).values) and torch.equal(sims.gather(1, indices), values)
    values, indices = column_topk(sims, k)
    assert torch.equal(values, sims.T.topk(k, dim=1).values) and torch.equal(sims.T.gather(1, indices), values)


def test_bidirectional_knn_with_different_k_per_direction(random_pair):
    x, y = random_pair
    for backend in ("fused", "torch"):
        result = bidirectional_knn(x, y, 3, k_backward=6, block_elements=500, backend=backend)
        _, fwd, _, _, _ = brute_neighbourhoods(x, y, 3)
        _, _, bwd, _, _ = brute_neighbourhoods(x, y, 6)
        np.testing.assert_array_equal(result.forward_indices, fwd)
        np.testing.assert_array_equal(result.backward_indices, bwd)


def test_k_is_capped_at_the_corpus_size():
    rng = np.random.default_rng(0)
    x, y = unit(rng, 3), unit(rng, 2)
    result = bidirectional_knn(x, y, 10)
    assert result.forward_indices.shape == (3, 2) and result.backward_indices.shape == (2, 3)
    assert_same_pairs(mine(x, y, k=10), brute_mine(x, y, k=10))


@pytest.mark.parametrize("margin", MARGINS)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("threshold", [None, "median"])
def test_mine_matches_brute_force_on_random_data(random_pair, margin, mode, threshold):
    x, y = random_pair
    if threshold == "median":
        # midway between two neighbouring scores, so float32 vs float64 rounding cannot decide a pair
        scores = np.sort(list(brute_mine(x, y, 4, margin, mode).values()))
        threshold = float(scores[len(scores) // 2] + scores[len(scores) // 2 + 1]) / 2
    pairs = mine(x, y, k=4, margin=margin, mode=mode, threshold=threshold)
    assert_same_pairs(pairs, brute_mine(x, y, 4, margin, mode, threshold))
    if threshold is not None:
        assert len(pairs) and pairs.scores.min() >= threshold


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("margin", MARGINS)
def test_mine_matches_brute_force_on_real_data(mode, margin):
    x, y = demo_embeddings()
    assert_same_pairs(mine(x, y, k=4, margin=margin, mode=mode), brute_mine(x, y, 4, margin, mode))


def test_max_mode_uses_every_sentence_at_most_once_and_finds_real_pairs():
    x, y = demo_embeddings()
    _, _, gold = demo_texts()
    pairs = mine(x, y)
    assert len(set(pairs.src_indices.tolist())) == len(pairs) == len(set(pairs.tgt_indices.tolist()))
    found = pairs.as_set() & set(gold)
    assert len(found) / len(gold) > 0.85 and len(found) / len(pairs) > 0.8


def test_threshold_applies_in_forward_mode_too(random_pair):
    x, y = random_pair
    everything = mine(x, y, mode="forward")
    assert len(everything) == len(x)
    kept = mine(x, y, mode="forward", threshold=1.1)
    assert 0 < len(kept) < len(x) and (kept.scores >= 1.1).all()


def test_iteration_yields_python_tuples(random_pair):
    x, y = random_pair
    first = next(iter(mine(x, y)))
    assert isinstance(first[0], int) and isinstance(first[1], int) and isinstance(first[2], float)


def test_score_pairs_uses_neighbourhoods_of_both_sides(random_pair):
    x, _ = random_pair
    rng = np.random.default_rng(3)
    y = x + 0.2 * unit(rng, len(x))
    y /= np.linalg.norm(y, axis=1, keepdims=True)
    sim, _, _, a_x, a_y = brute_neighbourhoods(x, y, 4)
    for margin in MARGINS:
        expected = [brute_margin(sim[i, i], a_x[i], a_y[i], margin) for i in range(len(x))]
        np.testing.assert_allclose(score_pairs(x, y, k=4, margin=margin), expected, atol=1e-5)


def test_score_pairs_rejects_unaligned_sides(random_pair):
    x, y = random_pair
    with pytest.raises(ValueError, match="aligned rows"):
        score_pairs(x, y)


def test_document_mining_mines_inside_each_document(random_pair):
    x, y = random_pair
    src_docs = [i % 3 for i in range(len(x))]
    tgt_docs = [j % 3 for j in range(len(y))]
    pairs = mine_documents(x, y, src_docs, tgt_docs, k=4, mode="intersect")
    expected = {}
    for doc in range(3):
        src_rows = np.flatnonzero(np.array(src_docs) == doc)
        tgt_rows = np.flatnonzero(np.array(tgt_docs) == doc)
        for (i, j), s in brute_mine(x[src_rows], y[tgt_rows], 4, "ratio", "intersect").items():
            expected[(int(src_rows[i]), int(tgt_rows[j]))] = s
    assert_same_pairs(pairs, expected)


def test_document_mining_needs_one_id_per_row(random_pair):
    x, y = random_pair
    with pytest.raises(ValueError, match="one id per sentence"):
        mine_documents(x, y, [0] * (len(x) - 1), [0] * len(y))


def runs(*sets):
    return [
        MinedPairs(
            np.array([p[0] for p in s], np.int64),
            np.array([p[1] for p in s], np.int64),
            np.array([p[2] for p in s], np.float32),
            np.zeros(len(s), np.float32),
        )
        for s in sets
    ]


def test_voting_strict_and_pairwise_take_scores_from_the_first_run():
    orig, src_translated, tgt_translated = runs(
        [(0, 0, 1.5), (1, 1, 1.2), (2, 5, 1.1)],
        [(0, 0, 9.0), (1, 1, 9.0), (3, 3, 9.0)],
        [(0, 0, 7.0), (3, 3, 7.0), (4, 4, 7.0)],
    )
    strict = {(i, j): s for i, j, s in vote([orig, src_translated, tgt_translated], "strict")}
    assert strict == {(0, 0): 1.5}
    pairwise = {(i, j): s for i, j, s in vote([orig, src_translated, tgt_translated], "pairwise")}
    assert pairwise == {(0, 0): 1.5, (1, 1): pytest.approx(1.2), (3, 3): 9.0}


def test_voting_rejects_unknown_strategy():
    with pytest.raises(ValueError, match="strict"):
        vote(runs([(0, 0, 1.0)], [(0, 0, 1.0)]), "majority")


def test_mine_with_voting_uses_translations_from_lists_or_callables():
    from bitext_hf.mining import mine_with_voting

    one_hot = {w: np.eye(8, dtype=np.float32)[i] for i, w in enumerate("abcdef")}

    def encode(texts):
        return np.stack([one_hot[t] for t in texts])

    src, tgt = ["a", "b", "c"], ["b", "c", "d"]
    # votes: (1, 0) in all three runs, (2, 1) in the original and the target-translated run, (0, 2) only in one
    settings = dict(k=1, threshold=0.5)
    strict = mine_with_voting(
        src,
        tgt,
        encode,
        src_translated=["d", "b", "e"],
        tgt_translated=lambda t: ["b", "c", "f"],
        strategy="strict",
        **settings,
    )
    pairwise = mine_with_voting(
        src, tgt, encode, src_translated=["d", "b", "e"], tgt_translated=["b", "c", "f"], **settings
    )
    assert strict.as_set() == {(1, 0)}
    assert pairwise.as_set() == {(1, 0), (2, 1)}
    with pytest.raises(ValueError, match="align 1:1"):
        mine_with_voting(src, tgt, encode, src_translated=["a"], tgt_translated=tgt)


def test_knn_search_backends_agree(random_pair):
    x, y = random_pair
    faiss_sims, faiss_idx = knn_search(x, y, 3, backend="faiss")
    torch_sims, torch_idx = knn_search(x, y, 3, backend="torch")
    np.testing.assert_array_equal(faiss_idx, torch_idx)
    np.testing.assert_allclose(faiss_sims, torch_sims, atol=1e-5)


@pytest.mark.parametrize(
    ("x", "y", "message"),
    [
        (np.full((3, 4), np.nan, np.float32), np.ones((3, 4), np.float32), "NaN or inf"),
        (np.ones((3, 4), np.float32), np.array([[1, 2, 3, np.inf]], np.float32), "NaN or inf"),
        (np.ones((3, 4), np.float32), np.ones((3, 5), np.float32), "dimension mismatch"),
        (np.ones((0, 4), np.float32), np.ones((3, 4), np.float32), "empty"),
        (np.ones(4, np.float32), np.ones((3, 4), np.float32), "2-D"),
    ],
)
def test_bad_embeddings_are_rejected(x, y, message):
    with pytest.raises(ValueError, match=message):
        mine(x, y)


def test_unknown_mode_and_margin_are_rejected(random_pair):
    x, y = random_pair
    with pytest.raises(ValueError, match="retrieval mode"):
        mine(x, y, mode="best")
    with pytest.raises(ValueError, match="margin"):
        mine(x, y, margin="cosine")


def test_write_pairs_tsv_and_parquet(tmp_path, random_pair):
    import pyarrow.parquet as pq

    x, y = random_pair
    pairs = mine(x, y)
    src_texts = [f"source {i}" for i in range(len(x))]
    tgt_texts = [f"target {j}" for j in range(len(y))]
    tsv = write_pairs(pairs, tmp_path / "pairs.tsv", src_texts=src_texts, tgt_texts=tgt_texts)
    lines = tsv.read_text().splitlines()
    assert lines[0] == "score\tsrc_index\ttgt_index\tsrc\ttgt" and len(lines) == len(pairs) + 1
    score, src, tgt, src_text, tgt_text = lines[1].split("\t")
    assert float(score) == pytest.approx(float(pairs.scores[0]), abs=1e-6)
    assert (int(src), int(tgt)) == (int(pairs.src_indices[0]), int(pairs.tgt_indices[0]))
    assert src_text == f"source {src}" and tgt_text == f"target {tgt}"
    table = pq.read_table(write_pairs(pairs, tmp_path / "pairs.parquet", src_texts=src_texts, tgt_texts=tgt_texts))
    assert table.column_names == ["score", "src_index", "tgt_index", "src", "tgt"]
    np.testing.assert_array_equal(table["src_index"].to_numpy(), pairs.src_indices)


def test_write_pairs_refuses_tabs_in_tsv_and_leaves_no_file(tmp_path, random_pair):
    x, y = random_pair
    pairs = mine(x, y)
    out = tmp_path / "pairs.tsv"
    out.write_text("previous complete output\n")
    with pytest.raises(ValueError, match=r"(?i)parquet"):
        write_pairs(pairs, out, src_texts=["a\tb"] * len(x), tgt_texts=["c"] * len(y))
    assert out.read_text() == "previous complete output\n"
    assert list(tmp_path.iterdir()) == [out], "no temporary file is left behind"


def test_ivf_index_finds_exact_neighbours_when_every_cell_is_probed():
    from bitext_hf.mining import ivf_index

    rng = np.random.default_rng(3)
    database, queries = unit(rng, 2000), unit(rng, 50)
    index = ivf_index(database, nlist=16, nprobe=16, seed=0)
    assert index.nlist == 16 and index.ntotal == 2000
    sims, indices = index.search(queries, 5)
    exact_sims, exact_indices = knn_search(queries, database, 5)
    np.testing.assert_allclose(sims, exact_sims, rtol=1e-5, atol=1e-5)
    assert (indices == exact_indices).all()
    # One probed cell of 16 scans ~1/16 of the database: it must miss some true neighbours, never invent any.
    index.nprobe = 1
    approximate_sims, _ = index.search(queries, 5)
    assert (approximate_sims <= exact_sims + 1e-5).all() and (approximate_sims < exact_sims - 1e-6).any()
    # nlist is capped so that every cell has the training points FAISS needs.
    assert ivf_index(database[:100], nlist=16).nlist == 2


def test_voting_runs_retrieve_by_intersection_as_the_paper_does(monkeypatch):
    import bitext_hf.mining as mining
    from bitext_hf.mining import mine_with_voting

    modes = []
    real_mine = mining.mine

    def recording_mine(*args, **kwargs):
        modes.append(kwargs.get("mode"))
        return real_mine(*args, **kwargs)

    monkeypatch.setattr(mining, "mine", recording_mine)
    one_hot = {w: np.eye(4, dtype=np.float32)[i] for i, w in enumerate("abcd")}

    def encode(texts):
        return np.stack([one_hot[t] for t in texts])

    mine_with_voting(["a", "b"], ["a", "b"], encode, src_translated=["a", "b"], tgt_translated=["a", "b"], k=1)
    assert modes == ["intersect"] * 3
    modes.clear()
    mine_with_voting(
        ["a", "b"], ["a", "b"], encode, src_translated=["a", "b"], tgt_translated=["a", "b"], k=1, mode="max"
    )
    assert modes == ["max"] * 3


def test_a_threshold_beyond_float32_keeps_nothing_without_a_warning(recwarn):
    """Scores are float32; a threshold of 1e308 is compared in float64 instead of overflowing into a warning."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((20, 8)).astype(np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    assert len(mine(x, x, threshold=1e308)) == 0 and len(mine(x, x, threshold=-1e308)) > 0
    assert not [warning for warning in recwarn if issubclass(warning.category, RuntimeWarning)]
