"""The alignment search against an exhaustive reference: on documents small enough to enumerate every bead sequence,
the search finds the best one; beads cover both documents in order; empty and one-sentence documents; scoring."""

from __future__ import annotations

import functools
import math

import numpy as np
import pytest

from bitext_hf.alignment import AlignSettings, align_sentences
from bitext_hf.alignment.overlaps import overlap_texts
from bitext_hf.alignment.search import alignment_types, bead_band, bead_score, search, sides_of
from bitext_hf.errors import UsageError


def random_encoder(seed: int, dim: int = 8):
    """Each distinct text gets its own random vector (the same text, the same vector)."""
    vectors: dict[str, np.ndarray] = {}
    rng = np.random.default_rng(seed)

    def encode(texts):
        for text in texts:
            vectors.setdefault(text, rng.standard_normal(dim))
        return np.stack([vectors[text] for text in texts]).astype(np.float32)

    return encode


def overlaps(src, tgt, encode, max_align):
    return overlap_texts([src, tgt], max_align - 1).embed(encode)


def path_score(src, tgt, beads, settings: AlignSettings) -> float:
    ratio = float(src.lengths[0].sum() / tgt.lengths[0].sum())
    arrays = sides_of(src, tgt)
    total = 0.0
    for xs, ys in beads:
        if not xs or not ys:
            total += settings.skip
        else:
            end_i, end_j = xs[-1] + 1, ys[-1] + 1
            total += bead_score(arrays, end_i, end_j, len(xs), len(ys), ratio, settings.margin, settings.length_prior)
    return total


def exhaustive_best(src, tgt, settings: AlignSettings) -> tuple[float, list]:
    """Every bead sequence from (0, 0) to (n, m), enumerated: the reference the programme must match."""
    types = [tuple(map(int, t)) for t in alignment_types(settings.max_align)]

    @functools.cache
    def sequences(i: int, j: int) -> list[list]:
        if i == 0 and j == 0:
            return [[]]
        found = []
        for a, b in types:
            if i - a >= 0 and j - b >= 0:
                bead = (list(range(i - a, i)), list(range(j - b, j)))
                found += [[*path, bead] for path in sequences(i - a, j - b)]
        return found

    best = max(sequences(src.n, tgt.n), key=lambda beads: path_score(src, tgt, beads, settings))
    return path_score(src, tgt, best, settings), best


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("settings", [AlignSettings(), AlignSettings(max_align=3, margin=True, skip=-0.3)])
def test_the_search_finds_the_best_bead_sequence_of_small_documents(seed, settings):
    rng = np.random.default_rng(seed)
    n, m = int(rng.integers(1, 5)), int(rng.integers(1, 5))
    src_sentences = [f"src {seed} {i} " + "x" * int(rng.integers(1, 30)) for i in range(n)]
    tgt_sentences = [f"tgt {seed} {j} " + "y" * int(rng.integers(1, 30)) for j in range(m)]
    src, tgt = overlaps(src_sentences, tgt_sentences, random_encoder(seed), settings.max_align)
    found = search(src, tgt, **settings.as_dict())
    best_score, best = exhaustive_best(src, tgt, settings)
    assert path_score(src, tgt, found.beads, settings) == pytest.approx(best_score, abs=1e-6)
    assert found.beads == best  # random vectors: no two sequences tie


def test_every_link_type_is_found_where_the_text_says_so():
    # Meanings shared by both sides, with 1-1, 2-1, 1-2, 2-2 (two sentences in swapped order), and 0-1 beads built
    # in: a bead's overlap text embeds as the sum of its meanings, so the right grouping has the highest cosine.
    rng = np.random.default_rng(1)
    basis = {word: rng.standard_normal(64) for word in "abcdefghijklmnopqrstuvwxyz"}

    def encode(texts):
        return np.stack([sum(basis[w] for w in text.split() if w in basis) + 1e-3 for text in texts])

    src = ["a", "b", "c", "d", "e f", "g", "h", "i", "j", "l", "m", "n"]
    tgt = ["a", "b c", "d", "e", "f", "g h", "j", "i", "l m", "x", "n"]
    result = align_sentences(src, tgt, encode, length_prior=False)
    expected = [
        ([0], [0]),  # 1-1
        ([1, 2], [1]),  # 2-1
        ([3], [2]),
        ([4], [3, 4]),  # 1-2
        ([5, 6], [5]),  # 2-1
        ([7, 8], [6, 7]),  # 2-2, crossed
        ([9, 10], [8]),
        ([], [9]),  # 0-1
        ([11], [10]),
    ]
    assert result.beads == expected
    assert result.scores[7] == 0.0 and (result.scores[[0, 1, 3, 5]] > 0).all()


@pytest.mark.parametrize("n, m", [(0, 0), (0, 3), (2, 0), (1, 1), (1, 4), (4, 1)])
def test_empty_and_one_sentence_documents(n, m):
    src = [f"s{i}" for i in range(n)]
    tgt = [f"t{j}" for j in range(m)]
    result = align_sentences(src, tgt, random_encoder(0))
    assert [x for xs, _ in result.beads for x in xs] == list(range(n))
    assert [y for _, ys in result.beads for y in ys] == list(range(m))
    assert len(result.scores) == len(result.beads)
    if n == 0 or m == 0:
        assert all(not xs or not ys for xs, ys in result.beads) and not result.scores.any()


def test_long_documents_stay_inside_the_band_and_cover_everything():
    # A document longer than the bands: the anchor band and the bead window cut the search, and the path still
    # covers every sentence in order; the 1-1 diagonal built in is found.
    rng = np.random.default_rng(2)
    n = 700
    meanings = rng.standard_normal((n, 32))

    def encode(texts):
        rows = []
        for text in texts:
            ids = [int(token[1:]) for token in text.split()]
            rows.append(meanings[ids].sum(0) + rng.standard_normal(32) * 0.05)
        return np.stack(rows)

    src = [f"s{i}" for i in range(n)]
    tgt = [f"t{i}" for i in range(n) if i != 350]  # one source sentence has no translation
    result = align_sentences(src, tgt, encode, length_prior=False)
    assert [x for xs, _ in result.beads for x in xs] == list(range(n))
    assert [y for _, ys in result.beads for y in ys] == list(range(n - 1))
    assert ([350], []) in result.beads
    assert sum(len(xs) == len(ys) == 1 for xs, ys in result.beads) == n - 1


def test_bead_score_is_the_cosine_less_the_neighbours_times_the_length_prior():
    src_sentences, tgt_sentences = ["aa", "bbbb", "c"], ["dd", "eee", "ffffff"]
    src, tgt = overlaps(src_sentences, tgt_sentences, random_encoder(3), 3)
    ratio = 7 / 11
    arrays = sides_of(src, tgt)
    # The bead of source sentences 0-1 ("aa bbbb") and target sentence 1 ("eee").
    x, y = src.vectors[src.index[1, 1]], tgt.vectors[tgt.index[0, 1]]
    cosine = float(x @ y)
    tgt_neighbours = (x @ tgt.vectors[tgt.index[0, 0]] + x @ tgt.vectors[tgt.index[0, 2]]) / 2
    src_neighbours = y @ src.vectors[src.index[0, 2]]  # nothing before sentence 0
    prior = math.log2(1 + min(7, 3 * ratio) / max(7, 3 * ratio))
    expected = (cosine - (tgt_neighbours + src_neighbours) / 2) * prior
    assert bead_score(arrays, 2, 2, 2, 1, ratio, True, True) == pytest.approx(expected, rel=1e-5)
    assert bead_score(arrays, 2, 2, 2, 1, ratio, False, False) == pytest.approx(cosine, rel=1e-5)


def test_each_distinct_overlap_is_encoded_once():
    seen: list[str] = []
    encode = random_encoder(0)

    def counting(texts):
        seen.extend(texts)
        return encode(texts)

    align_sentences(["a", "b", "a", "b"], ["a", "b"], counting, max_align=3)
    assert sorted(seen) == sorted(set(seen))
    assert set(seen) == {"a", "b", "a b", "b a"}


@pytest.mark.parametrize(
    "options",
    [dict(max_align=1), dict(top_k=0), dict(window=-1), dict(max_align=True), dict(skip=float("nan"))],
)
def test_unusable_settings_are_usage_errors(options):
    with pytest.raises(UsageError):
        AlignSettings(**options)


def test_a_string_instead_of_a_list_of_sentences_is_refused():
    with pytest.raises(TypeError, match="list of sentences"):
        align_sentences("one sentence", ["x"], random_encoder(0))


def test_iterators_of_sentences_are_read_once_and_aligned_whole():
    """A generator on either side: checking its items must not consume the sentences the search needs."""
    sentences = ["one two", "three four five", "six", "seven eight"]
    from_lists = align_sentences(sentences, sentences, random_encoder(0))
    from_iterators = align_sentences(iter(sentences), (s for s in sentences), random_encoder(0))
    assert from_iterators.beads == from_lists.beads == [([i], [i]) for i in range(4)]
    with pytest.raises(TypeError, match="list of sentences"):
        align_sentences(iter(["fine", 3]), sentences, random_encoder(0))


def test_the_repr_of_an_alignment_is_a_summary():
    sentences = [f"sentence {i} " + "word " * (i % 7) for i in range(3000)]
    alignment = align_sentences(sentences, sentences, random_encoder(0), max_align=2)
    text = repr(alignment)
    assert text.startswith("Alignment(3000 beads, 3000 links, 3000 source x 3000 target sentences")
    assert len(text) < 200


def test_real_text_with_the_offline_encoder(tiny_parallel_corpus_by_language):
    # German and French translations of the same twelve English sentences, the French with two sentences merged into
    # one and one sentence left out: the default encoder (USE v3) and the default settings find those beads.
    from bitext_hf.encoders import load_encoder

    de = [translation for _, translation in tiny_parallel_corpus_by_language["de"][:12]]
    fr = [translation for _, translation in tiny_parallel_corpus_by_language["fr"][:12]]
    fr = [*fr[:3], fr[3] + " " + fr[4], *fr[5:8], *fr[9:]]
    result = align_sentences(de, fr, load_encoder())
    assert ([3, 4], [3]) in result.beads and ([8], []) in result.beads
    assert sum(len(xs) == len(ys) == 1 for xs, ys in result.beads) == 9


def test_a_stretch_without_anchors_costs_cells_in_proportion_to_its_length():
    # No anchor at all (documents that do not translate each other): the band follows the diagonal instead of
    # covering the whole n x m rectangle, and still joins (0, 0) to (n, m) row after row.
    n, m, window, stretch = 5000, 4000, 5, 250
    lo, hi = bead_band([], n, m, window, stretch)
    assert lo[0] == 0 and hi[-1] == m and (lo[1:] <= hi[:-1]).all() and (np.diff(lo) >= 0).all()
    assert (hi - lo + 1).sum() <= (n + 1) * (2 * stretch + 3)
    # Anchors close together: Bertalign's rectangles, untouched by the stretch bound.
    lo, hi = bead_band([(1, 1), (2, 2)], 3, 3, window, stretch)
    assert lo.tolist() == [0, 0, 0, 0] and hi.tolist() == [3, 3, 3, 3]


def test_unrelated_documents_align_without_the_whole_table():
    rng = np.random.default_rng(4)
    src = [f"s{i}" for i in range(3000)]
    tgt = [f"t{j}" for j in range(2500)]
    vectors = {text: rng.standard_normal(16) for text in src + tgt}

    def encode(texts):
        return np.stack([sum(vectors[word] for word in text.split()) for text in texts])

    result = align_sentences(src, tgt, encode, max_align=3)
    assert [x for xs, _ in result.beads for x in xs] == list(range(3000))
    assert [y for _, ys in result.beads for y in ys] == list(range(2500))
