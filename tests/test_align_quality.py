"""``bitext-hf align --classifier``: a last ``quality`` column in the tsv, jsonl and parquet outputs (each bead's
probability of being a translation, 0.0 for a 1-0 or 0-1 bead), from the cosine of the bead's overlap embeddings and
the ratio margin over the document's links; folders of documents too; no column (and the same bytes as ever) without
the option; and every refusal (vecalign, a classifier that cannot load, one of another encoder) before any encoding."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from cli_fakes import fake_embedding, install_fake_encoders, run, write_lines

from bitext_hf.errors import EXIT_ENCODER, EXIT_OK, EXIT_USAGE
from bitext_hf.modeling.pair_quality import PairQualityClassifier, PairQualityConfig

# An unmatched target sentence (index 3) and two source sentences that one target sentence translates (1 and 2).
SRC = ["cat|en", "dog|en", "tree|en", "house|en", "river|en", "sun|en", "moon|en"]
TGT = ["cat|de", "dog|de tree|de", "house|de", "extra|de", "river|de", "sun|de", "moon|de"]
COLUMNS = ["score", "src_lines", "tgt_lines", "src", "tgt"]


@pytest.fixture
def fakes(monkeypatch):
    return install_fake_encoders(monkeypatch)


@pytest.fixture
def documents(tmp_path):
    return write_lines(tmp_path / "doc.en", SRC), write_lines(tmp_path / "doc.de", TGT)


def _align(capsys, src, tgt, *options):
    return run(capsys, "align", "--src", src, "--tgt", tgt, "--no-cache", *options)


def _constant_classifier(folder: Path, *, bias: float = 5.0, encoder: str | None = None) -> str:
    """A classifier whose probability is sigmoid(bias) for every pair (calibration scale 0)."""
    torch.manual_seed(0)
    PairQualityClassifier(
        PairQualityConfig(calibration_scale=0.0, calibration_bias=bias, encoder=encoder)
    ).save_pretrained(folder)
    return str(folder)


def _table(path: Path, fmt: str) -> list[dict]:
    if fmt == "tsv":
        with open(path, encoding="utf-8", newline="") as handle:
            rows = list(csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE))
        for row in rows:
            row["src_lines"] = [int(x) for x in row["src_lines"].split(",") if x]
            row["tgt_lines"] = [int(y) for y in row["tgt_lines"].split(",") if y]
            row["score"] = float(row["score"])
            if "quality" in row:
                row["quality"] = float(row["quality"])
        return rows
    import pandas as pd

    table = pd.read_json(path, lines=True) if fmt == "jsonl" else pd.read_parquet(path)
    return [
        {**row, "src_lines": list(row["src_lines"]), "tgt_lines": list(row["tgt_lines"])}
        for row in table.to_dict("records")
    ]


@pytest.mark.parametrize("fmt", ["tsv", "jsonl", "parquet"])
def test_the_quality_column_is_last_and_a_probability(capsys, fakes, documents, tmp_path, fmt):
    plain, rated = tmp_path / f"plain.{fmt}", tmp_path / f"rated.{fmt}"
    assert _align(capsys, *documents, "--out", str(plain))[0] == EXIT_OK
    code, out, err = _align(capsys, *documents, "--out", str(rated), "--classifier", "default")
    assert code == EXIT_OK, err
    rows = _table(rated, fmt)
    assert list(rows[0]) == [*COLUMNS, "quality"]
    assert all(0.0 <= row["quality"] <= 1.0 for row in rows)
    unmatched = [row for row in rows if not (row["src_lines"] and row["tgt_lines"])]
    assert unmatched and all(row["quality"] == 0.0 for row in unmatched)  # no translation: 0.0, as documented
    assert any(row["quality"] > 0.0 for row in rows if row["src_lines"] and row["tgt_lines"])
    # The other columns are the ones written without a classifier.
    assert [{k: v for k, v in row.items() if k != "quality"} for row in rows] == _table(plain, fmt)
    assert "mean quality of the links" in out
    assert json.loads((tmp_path / f"rated.{fmt}.meta.json").read_text())["classifier"] == "default"


def test_without_classifier_there_is_no_column_and_the_same_bytes(capsys, fakes, documents, tmp_path):
    assert _align(capsys, *documents, "--out", str(tmp_path / "plain.tsv"))[0] == EXIT_OK
    assert _align(capsys, *documents, "--out", str(tmp_path / "rated.tsv"), "--classifier", "default")[0] == EXIT_OK
    plain = (tmp_path / "plain.tsv").read_text().splitlines()
    rated = (tmp_path / "rated.tsv").read_text().splitlines()
    assert plain[0].split("\t") == COLUMNS
    assert [line.rsplit("\t", 1)[0] for line in rated] == plain  # the quality column, dropped, leaves the same bytes
    sidecar = json.loads((tmp_path / "plain.tsv.meta.json").read_text())
    assert "classifier" not in sidecar


def test_the_features_are_the_joined_texts_cosine_and_ratio_margin_over_the_links(
    capsys, fakes, documents, tmp_path, monkeypatch
):
    from bitext_hf.mining import quality as module
    from bitext_hf.mining import score_pairs

    seen = []

    def spy(classifier, sources, targets, cosines, margins):
        seen.append((list(sources), list(targets), np.asarray(cosines), np.asarray(margins)))
        return np.full(len(sources), 0.5, np.float32)

    monkeypatch.setattr(module, "pair_quality", spy)
    code, _, err = _align(capsys, *documents, "--out", str(tmp_path / "o.jsonl"), "--classifier", "default")
    assert code == EXIT_OK, err
    rows = _table(tmp_path / "o.jsonl", "jsonl")
    links = [row for row in rows if row["src_lines"] and row["tgt_lines"]]
    [(sources, targets, cosines, margins)] = seen
    assert sources == [row["src"] for row in links] and targets == [row["tgt"] for row in links]
    src = np.stack([fake_embedding(text) for text in sources])
    tgt = np.stack([fake_embedding(text) for text in targets])
    np.testing.assert_allclose(cosines, np.einsum("ij,ij->i", src, tgt), atol=1e-5)
    np.testing.assert_allclose(margins, score_pairs(src, tgt, k=min(4, len(links)), margin="ratio"), atol=1e-5)
    assert [row["quality"] for row in rows] == [0.5 if row in links else 0.0 for row in rows]


def test_folders_of_documents_get_the_column_in_each_output(capsys, fakes, tmp_path):
    for side, sentences in (("en", SRC), ("de", TGT)):
        (tmp_path / side).mkdir()
        write_lines(tmp_path / side / "one", sentences)
        write_lines(tmp_path / side / "two", sentences[:3])
    sure = _constant_classifier(tmp_path / "sure", encoder="use-multilingual-v3")
    out = tmp_path / "aligned"
    args = ["--out", str(out), "--format", "parquet", "--classifier", sure]
    code, stdout, err = _align(capsys, str(tmp_path / "en"), str(tmp_path / "de"), *args)
    assert code == EXIT_OK, err
    expected = float(torch.sigmoid(torch.tensor(5.0)))
    for name in ("one.parquet", "two.parquet"):
        rows = _table(out / name, "parquet")
        assert list(rows[0])[-1] == "quality"
        for row in rows:
            linked = bool(len(row["src_lines"]) and len(row["tgt_lines"]))
            assert row["quality"] == pytest.approx(expected if linked else 0.0, abs=1e-6)
    assert f"mean quality of the links {expected:.3f}" in stdout
    assert json.loads((out / "alignment.meta.json").read_text())["classifier"] == sure


def test_the_job_returns_each_documents_qualities(fakes, documents, tmp_path):
    from bitext_hf.jobs import AlignConfig, run_alignment

    result = run_alignment(AlignConfig(*documents, out=str(tmp_path / "o.tsv"), classifier="default", no_cache=True))
    [quality] = result.qualities
    assert quality.dtype == np.float32 and len(quality) == len(result.alignments[0])
    assert "quality" in result.seconds
    plain = run_alignment(AlignConfig(*documents, no_cache=True))
    assert plain.qualities is None and "quality" not in plain.seconds


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(path): path.read_bytes() for path in folder.rglob("*") if path.is_file()}


@pytest.mark.parametrize(
    "options, code, says",
    [
        (["--out", "{tmp}/o.align", "--classifier", "default"], EXIT_USAGE, "--format vecalign is one bead a line"),
        (
            ["--out", "{tmp}/o.tsv", "--format", "vecalign", "--classifier", "default"],
            EXIT_USAGE,
            "no place for it",
        ),
        (["--classifier", "default"], EXIT_USAGE, "the printed beads are one bead a line"),
        (["--out", "{tmp}/o.tsv", "--classifier", " "], EXIT_USAGE, "--classifier: empty"),
        (["--out", "{tmp}/o.tsv", "--classifier", "{tmp}/missing"], EXIT_ENCODER, "cannot load a pair classifier"),
        (
            ["--out", "{tmp}/o.tsv", "--model", "other", "--classifier", "default"],
            EXIT_USAGE,
            "trained on the cosines of the encoder 'use-multilingual-v3', not 'other'",
        ),
        (
            ["--out", "{tmp}/o.tsv", "--classifier", "{other}"],
            EXIT_USAGE,
            "trained on the cosines of the encoder 'other-encoder'",
        ),
    ],
)
def test_a_classifier_that_cannot_work_is_refused_before_any_encoding(
    capsys, fakes, documents, tmp_path, options, code, says
):
    other = _constant_classifier(tmp_path / "other", encoder="other-encoder")
    before = _snapshot(tmp_path)
    argv = [option.format(tmp=tmp_path, other=other) for option in options]
    got, _, err = _align(capsys, *documents, *argv)
    assert got == code and says in err, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert fakes.loaded == [] and fakes.n_encoded == 0  # not even loaded
    assert _snapshot(tmp_path) == before  # nothing written
