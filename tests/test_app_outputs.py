"""The review app opens what the commands write: `mine` and `score` in each table format, `align` in each of its
formats (vecalign with its documents), made here by the real commands with the tests' fake encoders."""

from __future__ import annotations

import pytest
from cli_fakes import SOURCES, TARGETS, SumEncoder, install_fake_encoders, run, use_encoder, write_lines

from bitext_hf.app import AlignmentReview, PairsReview, ReviewFilters

DOC_EN = ["cat|en sleeps|en.", "dog|en runs|en.", "tree|en grows|en.", "house|en stands|en."]
DOC_DE = ["cat|de sleeps|de.", "dog|de runs|de. tree|de grows|de.", "house|de stands|de."]


@pytest.mark.parametrize("name", ["pairs.tsv", "pairs.csv", "pairs.jsonl", "pairs.parquet"])
def test_mine_output_opens_and_exports(capsys, monkeypatch, tmp_path, name):
    install_fake_encoders(monkeypatch)
    src, tgt = write_lines(tmp_path / "src.txt", SOURCES), write_lines(tmp_path / "tgt.txt", TARGETS)
    out = tmp_path / name
    code, _, err = run(capsys, "mine", "--src", src, "--tgt", tgt, "--out", str(out))
    assert code == 0, err
    review = PairsReview(out)
    assert review.count == len(SOURCES) and sorted(review.table.column("src").to_pylist()) == sorted(SOURCES)
    review.reject([0])
    exported, count = review.export()
    assert count == len(SOURCES) - 1 and PairsReview(exported).count == count


@pytest.mark.parametrize("name", ["scored.tsv", "scored.jsonl", "scored.parquet"])
def test_score_output_opens(capsys, monkeypatch, tmp_path, name):
    install_fake_encoders(monkeypatch)
    corpus = write_lines(tmp_path / "corpus.tsv", [f"{s}\t{t}" for s, t in zip(SOURCES, TARGETS)])
    out = tmp_path / name
    code, _, err = run(capsys, "score", "--pairs", corpus, "--out", str(out))
    assert code == 0, err
    review = PairsReview(out)
    median = float(sorted(review.scores)[len(SOURCES) // 2])
    assert review.count == len(SOURCES) and review.kept(ReviewFilters(threshold=median)).sum() >= 1


@pytest.mark.parametrize("name", ["doc.align", "doc.tsv", "doc.jsonl", "doc.parquet", "doc.tmx"])
def test_align_output_opens_as_pairs_and_as_an_alignment(capsys, monkeypatch, tmp_path, name):
    use_encoder(monkeypatch, SumEncoder())
    en, de = write_lines(tmp_path / "doc.en", DOC_EN), write_lines(tmp_path / "doc.de", DOC_DE)
    out = tmp_path / name
    languages = ["--src-lang", "en", "--tgt-lang", "de"] if name.endswith(".tmx") else []
    code, _, err = run(capsys, "align", "--src", en, "--tgt", de, "--out", str(out), *languages)
    assert code == 0, err
    if not name.endswith(".align"):  # vecalign's format holds no text: it is reviewed with its documents
        pairs = PairsReview(out)
        assert "dog|de runs|de. tree|de grows|de." in pairs.table.column("tgt").to_pylist()
    if not name.endswith(".tmx"):  # a translation memory keeps the links, not the beads
        alignment = AlignmentReview(en, de, out)
        assert ([1, 2], [1]) in alignment.beads and alignment.summary()["links"] == 3
