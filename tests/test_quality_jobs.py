"""The pair classifier in the jobs: ``score`` writes a ``quality`` column out of the box (``--classifier``,
``--min-quality``), ``mine`` adds it when asked and chooses its threshold for ``--min-precision`` (recorded in the
sidecar), and every refusal comes before any encoding."""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path

import numpy as np
import pytest
import torch
from cli_fakes import SOURCES, TARGETS, install_fake_encoders, run, write_lines

from bitext_hf.errors import EXIT_DATA, EXIT_ENCODER, EXIT_OK, EXIT_USAGE
from bitext_hf.modeling.pair_quality import PairQualityClassifier, PairQualityConfig


@pytest.fixture
def fakes(monkeypatch):
    return install_fake_encoders(monkeypatch)


@pytest.fixture
def pairs(tmp_path: Path) -> str:
    path = tmp_path / "pairs.tsv"
    path.write_text("".join(f"{s}\t{t}\n" for s, t in zip(SOURCES, TARGETS)), encoding="utf-8")
    return str(path)


def _classifier(folder: Path, *, bias: float = 0.0, scale: float = 1.0, encoder: str | None = None) -> str:
    """A classifier whose probability is sigmoid(scale * logit + bias): scale 0 makes it the constant sigmoid(bias)."""
    torch.manual_seed(0)
    config = PairQualityConfig(calibration_scale=scale, calibration_bias=bias, encoder=encoder)
    PairQualityClassifier(config).save_pretrained(folder)
    return str(folder)


def _rows(path: Path) -> list[dict[str, str]]:
    with open(path, encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE))


def test_score_writes_quality_out_of_the_box(capsys, fakes, pairs, tmp_path):
    code, out, err = run(capsys, "score", "--pairs", pairs, "--out", str(tmp_path / "o.tsv"))
    assert code == EXIT_OK, err
    rows = _rows(tmp_path / "o.tsv")
    assert list(rows[0]) == ["score", "src_index", "tgt_index", "src", "tgt", "quality"]
    assert all(0.0 <= float(row["quality"]) <= 1.0 for row in rows) and len(rows) == len(SOURCES)
    assert "quality:" in out and "estimated precision" in out


def test_score_min_quality_keeps_the_pairs_at_or_above_it(capsys, fakes, pairs, tmp_path):
    run(capsys, "score", "--pairs", pairs, "--out", str(tmp_path / "all.tsv"))
    everything = [float(row["quality"]) for row in _rows(tmp_path / "all.tsv")]
    ordered = sorted(set(everything))
    cut = (ordered[len(ordered) // 2 - 1] + ordered[len(ordered) // 2]) / 2  # between two pairs' values, none on it
    code, _, err = run(capsys, "score", "--pairs", pairs, "--out", str(tmp_path / "o.tsv"), "--min-quality", str(cut))
    assert code == EXIT_OK, err
    kept = [float(row["quality"]) for row in _rows(tmp_path / "o.tsv")]
    assert len(kept) == sum(value >= cut for value in everything) > 0 and min(kept) >= cut


def test_score_without_a_classifier_writes_no_quality(capsys, fakes, pairs, tmp_path):
    code, out, err = run(capsys, "score", "--pairs", pairs, "--out", str(tmp_path / "o.tsv"), "--classifier", "none")
    assert code == EXIT_OK, err
    assert "quality" not in _rows(tmp_path / "o.tsv")[0] and "quality" not in out


def test_the_default_classifier_leaves_another_encoder_alone(capsys, fakes, pairs, tmp_path):
    code, out, err = run(capsys, "score", "--pairs", pairs, "--out", str(tmp_path / "o.tsv"), "--model", "my/encoder")
    assert code == EXIT_OK, err
    assert "quality" not in _rows(tmp_path / "o.tsv")[0]
    assert "no quality column: the default classifier reads the cosines of use-multilingual-v3" in out


@pytest.mark.parametrize(
    "options, code, message",
    [
        (["--classifier", "{tmp}/missing"], EXIT_ENCODER, "cannot load a pair classifier"),
        (["--classifier", "{other}"], EXIT_USAGE, "trained on the cosines of the encoder 'other-encoder'"),
        (["--classifier", "none", "--min-quality", "0.5"], EXIT_USAGE, "--classifier none has none"),
        (["--min-quality", "0"], EXIT_USAGE, "--min-quality"),
        (["--min-quality", "1.5"], EXIT_USAGE, "--min-quality"),
        (["--min-quality", "nan"], EXIT_USAGE, "--min-quality"),
        (["--classifier", " "], EXIT_USAGE, "--classifier: empty"),
        (["--classifier", "{fifo}"], EXIT_ENCODER, "config.json is not a regular file (a FIFO)"),
        (["--classifier", "{pickle}"], EXIT_ENCODER, "no model.safetensors in the folder"),
        (["--classifier", "{pairs}"], EXIT_ENCODER, "not a folder"),
        (["--classifier", "{link}"], EXIT_ENCODER, "config.json is a symbolic link to nothing"),
    ],
)
def test_score_refuses_a_classifier_that_cannot_work_before_encoding(
    capsys, fakes, pairs, tmp_path, options, code, message
):
    other = _classifier(tmp_path / "other", encoder="other-encoder")
    for name in ("fifo", "pickle", "link"):
        (tmp_path / name).mkdir()
    os.mkfifo(tmp_path / "fifo" / "config.json")  # never opened: the loader would wait for a writer
    (tmp_path / "pickle" / "config.json").write_text(json.dumps({"model_type": "bitext_pair_quality"}))
    (tmp_path / "pickle" / "pytorch_model.bin").write_bytes(b"a pickle is never loaded")
    (tmp_path / "link" / "config.json").symlink_to(tmp_path / "nowhere")
    names = {name: tmp_path / name for name in ("fifo", "pickle", "link")}
    argv = [option.format(tmp=tmp_path, other=other, pairs=pairs, **names) for option in options]
    got, _, err = run(capsys, "score", "--pairs", pairs, "--out", str(tmp_path / "o.tsv"), *argv)
    assert got == code and message in err and err.count("\n") == 1, err
    assert fakes.n_encoded == 0 and not (tmp_path / "o.tsv").exists()


def _mine(capsys, tmp_path, *options):
    src = write_lines(tmp_path / "src.txt", SOURCES)
    tgt = write_lines(tmp_path / "tgt.txt", TARGETS)
    return run(capsys, "mine", "--src", src, "--tgt", tgt, "--out", str(tmp_path / "m.tsv"), *options)


def test_mine_min_precision_chooses_the_threshold_and_records_it(capsys, fakes, tmp_path):
    code, out, err = _mine(capsys, tmp_path, "--min-precision", "0.5")
    assert code == EXIT_OK, err
    sidecar = json.loads((tmp_path / "m.tsv.meta.json").read_text())
    rows = _rows(tmp_path / "m.tsv")
    quality = np.array([float(row["quality"]) for row in rows])
    assert sidecar["classifier"] == "default" and sidecar["min_precision"] == 0.5
    assert sidecar["estimated_precision"] == pytest.approx(quality.mean(), abs=1e-5)
    assert sidecar["estimated_precision"] >= 0.5
    assert min(float(row["score"]) for row in rows) >= sidecar["threshold"] - 5e-7
    assert "the threshold chosen for --min-precision 0.5" in out


def test_mine_keeps_every_pair_when_each_is_surely_right(capsys, fakes, tmp_path):
    sure = _classifier(tmp_path / "sure", scale=0.0, bias=5.0)
    code, _, err = _mine(capsys, tmp_path, "--classifier", sure, "--min-precision", "0.99")
    assert code == EXIT_OK, err
    rows = _rows(tmp_path / "m.tsv")
    sidecar = json.loads((tmp_path / "m.tsv.meta.json").read_text())
    assert len(rows) == len(SOURCES) and sidecar["estimated_precision"] == pytest.approx(
        1 / (1 + np.exp(-5)), abs=1e-5
    )


def test_mine_refuses_a_precision_no_threshold_reaches(capsys, fakes, tmp_path):
    doubtful = _classifier(tmp_path / "doubtful", scale=0.0, bias=-5.0)
    code, _, err = _mine(capsys, tmp_path, "--classifier", doubtful, "--min-precision", "0.5")
    assert code == EXIT_DATA and "no threshold reaches it; the most any threshold reaches is 0.007" in err
    assert not (tmp_path / "m.tsv").exists() and not (tmp_path / "m.tsv.meta.json").exists()


def test_mine_adds_quality_only_when_asked(capsys, fakes, tmp_path):
    code, _, err = _mine(capsys, tmp_path)
    assert code == EXIT_OK, err
    assert "quality" not in _rows(tmp_path / "m.tsv")[0]
    assert "estimated_precision" not in json.loads((tmp_path / "m.tsv.meta.json").read_text())
    code, _, err = _mine(capsys, tmp_path, "--classifier", "default", "--threshold", "1.0")
    assert code == EXIT_OK, err
    assert "quality" in _rows(tmp_path / "m.tsv")[0]
    assert json.loads((tmp_path / "m.tsv.meta.json").read_text())["threshold"] == 1.0


@pytest.mark.parametrize(
    "options, message",
    [
        (["--min-precision", "0.9", "--threshold", "1.0"], "--min-precision chooses the threshold"),
        (["--classifier", "default", "--margin", "distance"], "--classifier reads the ratio margin"),
        (["--classifier", "default", "--k", "3"], "k=4"),
        (["--min-precision", "0"], "--min-precision"),
        (["--min-precision", "2"], "--min-precision"),
    ],
)
def test_mine_refuses_quality_options_that_cannot_work(capsys, fakes, tmp_path, options, message):
    code, _, err = _mine(capsys, tmp_path, *options)
    assert code == EXIT_USAGE and message in err, err
    assert fakes.n_encoded == 0 and not (tmp_path / "m.tsv").exists()


def test_mine_classifier_needs_the_sentences_of_embeddings(capsys, fakes, tmp_path):
    np.save(tmp_path / "src.npy", np.eye(4, 16, dtype=np.float32))
    np.save(tmp_path / "tgt.npy", np.eye(4, 16, dtype=np.float32))
    code, _, err = run(
        capsys,
        "mine",
        "--src",
        str(tmp_path / "src.npy"),
        "--tgt",
        str(tmp_path / "tgt.npy"),
        "--classifier",
        "default",
    )
    assert code == EXIT_USAGE and "--classifier reads the sentences: give --src-text" in err


def test_the_dataset_card_says_what_the_quality_estimate_is(capsys, fakes, tmp_path):
    import pyarrow as pa

    from bitext_hf.hub.dataset_card import read_sidecar_of, render_dataset_card

    code, _, err = _mine(capsys, tmp_path, "--min-precision", "0.5")
    assert code == EXIT_OK, err
    metadata = read_sidecar_of(tmp_path / "m.tsv")
    table = pa.table({"score": [1.2, 1.1], "src": ["a", "b"], "tgt": ["x", "y"]})
    card = render_dataset_card(table, metadata, repo_id="me/pairs", histogram_caption="scores")
    estimate = f"{metadata['estimated_precision']:.3f}"
    assert (
        f"| pair quality | `quality` column by the classifier `default`; estimated precision of these pairs (their mean quality) {estimate}, the threshold chosen for at least 0.5"
        in card
    )
    plain = render_dataset_card(table, {"threshold": 1.0}, repo_id="me/pairs", histogram_caption="scores")
    assert "pair quality" not in plain
