"""The review of an alignment (bitext_hf.app.alignment): beads read from each of align's formats, split, merged and
rejected with every sentence kept in one bead, edits beside the alignment, export in align's formats;
`bitext-hf app --src --tgt --alignment`."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

import numpy as np
import pytest

from bitext_hf.app import AlignmentReview, decisions_path
from bitext_hf.app.alignment import check_coverage
from bitext_hf.data.alignment_files import write_alignment
from bitext_hf.errors import DataValidationError, UsageError
from tests.cli_fakes import run

SRC = ["One.", "Two.", "Three.", "Four.", "Five."]
TGT = ["Eins.", "Zwei und drei.", "Vier.", "Fünf.", "Sechs."]
BEADS = [([0], [0]), ([1, 2], [1]), ([3], [2]), ([4], [3]), ([], [4])]
SCORES = [0.9, 0.5, 0.2, 0.8, 0.0]


@dataclass
class Beads:
    beads: list
    scores: np.ndarray


def documents(tmp_path, format="vecalign", name="doc.align"):
    (tmp_path / "doc.en").write_text("\n".join(SRC) + "\n", encoding="utf-8")
    (tmp_path / "doc.de").write_text("\n".join(TGT) + "\n", encoding="utf-8")
    write_alignment(Beads(BEADS, np.array(SCORES)), tmp_path / name, SRC, TGT, format)
    return tmp_path / "doc.en", tmp_path / "doc.de", tmp_path / name


@pytest.mark.parametrize(
    "format,name", [("vecalign", "doc.align"), ("tsv", "doc.tsv"), ("jsonl", "doc.jsonl"), ("parquet", "doc.parquet")]
)
def test_each_of_aligns_formats_gives_the_same_beads(tmp_path, format, name):
    review = AlignmentReview(*documents(tmp_path, format, name))
    assert review.beads == BEADS
    assert review.scores == pytest.approx(SCORES)
    assert review.summary() == {"beads": 5, "links": 4, "without_counterpart": 1, "edited": 0}
    assert review.weak(0.6).tolist() == [False, True, True, False, True]
    assert review.rows("weak beads", 0.6).tolist() == [1, 2, 4]


def test_split_merge_reject_keep_every_sentence_once_in_order(tmp_path):
    review = AlignmentReview(*documents(tmp_path))
    review.split(1)  # 2-1 -> 1-1 + 1-0, both with its score
    assert review.beads[1:3] == [([1], [1]), ([2], [])] and review.scores[1:3] == [0.5, 0.5]
    review.merge(3)  # ([3],[2]) + ([4],[3]) -> one 2-2 with the lower score
    assert review.beads[3] == ([3, 4], [2, 3]) and review.scores[3] == 0.2
    review.reject(0)  # 1-1 -> 1-0 + 0-1
    assert review.beads[:2] == [([0], []), ([], [0])] and review.scores[:2] == [0.0, 0.0]
    check_coverage(review.beads, len(SRC), len(TGT), "edited")
    assert review.beads[2:] == [([1], [1]), ([2], []), ([3, 4], [2, 3]), ([], [4])]
    assert review.edited == [True, True, True, True, True, False]
    # Weak: edited, or without counterpart (the last), or under the bound (none of the untouched 1-1s is left).
    assert review.weak(None).tolist() == [True] * 6


@pytest.mark.parametrize(
    "action,bead,message",
    [
        ("split", 0, "nothing to split"),
        ("reject", 4, "no counterpart"),
        ("merge", 4, "the last"),
        ("split", 5, "from 0 to 4"),
        ("reject", -1, "from 0 to 4"),
        ("merge", "1", "from 0 to 4"),
    ],
)
def test_edits_that_cannot_be_made_are_refused_and_nothing_is_saved(tmp_path, action, bead, message):
    review = AlignmentReview(*documents(tmp_path))
    with pytest.raises(UsageError, match=message):
        getattr(review, action)(bead)
    assert review.beads == BEADS and not decisions_path(tmp_path / "doc.align").exists()


def test_edits_survive_a_restart_and_the_inputs_are_untouched(tmp_path):
    paths = documents(tmp_path)
    before = [path.read_bytes() for path in paths]
    review = AlignmentReview(*paths)
    review.split(1)
    review.reject(0)
    again = AlignmentReview(*paths)
    assert again.beads == review.beads and again.scores == review.scores and again.edited == review.edited
    assert [path.read_bytes() for path in paths] == before


def test_edits_of_other_documents_are_refused_and_kept(tmp_path):
    paths = documents(tmp_path)
    AlignmentReview(*paths).split(1)
    saved = decisions_path(paths[2]).read_bytes()
    paths[1].write_text("\n".join([*TGT[:-1], "Sieben."]) + "\n", encoding="utf-8")
    with pytest.raises(DataValidationError, match="other versions"):
        AlignmentReview(*paths)
    assert decisions_path(paths[2]).read_bytes() == saved
    decisions_path(paths[2]).write_text("[1, 2]")
    paths[1].write_text("\n".join(TGT) + "\n", encoding="utf-8")
    with pytest.raises(DataValidationError, match="not a decisions file of this version"):
        AlignmentReview(*paths)


def test_export_in_each_format_is_what_align_would_write_for_the_edited_beads(tmp_path):
    review = AlignmentReview(*documents(tmp_path), src_lang="en", tgt_lang="de")
    review.split(1)
    expected = Beads(list(review.beads), np.array(review.scores))
    for name, format in (("out.align", "vecalign"), ("out.tsv", "tsv"), ("out.jsonl", "jsonl"), ("out.tmx", "tmx")):
        out, count = review.export(tmp_path / name)
        write_alignment(expected, tmp_path / f"expected-{name}", SRC, TGT, format, languages=("en", "de"))
        assert count == 6 and out.read_bytes() == (tmp_path / f"expected-{name}").read_bytes(), name


def test_alignments_that_do_not_fit_the_documents_are_refused(tmp_path):
    src, tgt, alignment = documents(tmp_path)
    alignment.write_text("[0]:[0]\n[2]:[1]\n")
    with pytest.raises(DataValidationError, match="bead 1: source sentences"):
        AlignmentReview(src, tgt, alignment)
    alignment.write_text("[0]:[0]\n")
    with pytest.raises(DataValidationError, match="covers 1 source sentences, the source document has 5"):
        AlignmentReview(src, tgt, alignment)
    alignment.write_text("[0]:[0]:high\n")
    with pytest.raises(DataValidationError, match=r"doc\.align:1"):
        AlignmentReview(src, tgt, alignment)
    (tmp_path / "pairs.tsv").write_text("score\tsrc\ttgt\n1.0\ta\tb\n")
    with pytest.raises(DataValidationError, match="no column src_lines"):
        AlignmentReview(src, tgt, tmp_path / "pairs.tsv")


def test_running_text_is_split_as_align_split_it_clauses_too(tmp_path):
    """The review re-splits the documents as ``align --split [--clauses]`` did: the alignment fits only that way."""
    (tmp_path / "a.en").write_text("One; two. Three.\n", encoding="utf-8")
    (tmp_path / "a.de").write_text("Eins; zwei. Drei.\n", encoding="utf-8")
    sentences = (["One;", "two.", "Three."], ["Eins;", "zwei.", "Drei."])
    beads = [([0], [0]), ([1], [1]), ([2], [2])]
    write_alignment(Beads(beads, np.ones(3)), tmp_path / "a.jsonl", *sentences, "jsonl")
    review = AlignmentReview(tmp_path / "a.en", tmp_path / "a.de", tmp_path / "a.jsonl", split=True, clauses=True)
    assert (review.src, review.tgt) == sentences
    with pytest.raises(DataValidationError, match="otherwise than align read it"):
        AlignmentReview(tmp_path / "a.en", tmp_path / "a.de", tmp_path / "a.jsonl", split=True)


def _running_text_alignment(tmp_path, sidecar: dict | None, name="a.jsonl"):
    (tmp_path / "a.en").write_text("One; two. Three.\n", encoding="utf-8")
    (tmp_path / "a.de").write_text("Eins; zwei. Drei.\n", encoding="utf-8")
    sentences = (["One;", "two.", "Three."], ["Eins;", "zwei.", "Drei."])
    write_alignment(Beads([([0], [0]), ([1], [1]), ([2], [2])], np.ones(3)), tmp_path / name, *sentences, "jsonl")
    if sidecar is not None:
        (tmp_path / f"{name}.meta.json").write_text(json.dumps(sidecar), encoding="utf-8")
    return tmp_path / "a.en", tmp_path / "a.de", tmp_path / name, sentences


ALIGNED = {"task": "sentence alignment", "split": True, "clauses": True, "src_lang": "en", "tgt_lang": "de"}


def test_what_align_recorded_in_the_sidecar_is_how_the_documents_are_read(tmp_path):
    """Running text aligned with --split --clauses opens with no option (the browser's opener gives none): the
    sidecar says how align read the documents and in which languages; what is given wins."""
    src, tgt, alignment, sentences = _running_text_alignment(tmp_path, ALIGNED)
    review = AlignmentReview(src, tgt, alignment)
    assert (review.src, review.tgt) == sentences and review.languages == ("en", "de")
    assert AlignmentReview(src, tgt, alignment, src_lang="fr").languages == ("fr", "de")
    with pytest.raises(DataValidationError, match="the source document has 2"):
        AlignmentReview(src, tgt, alignment, clauses=False)  # given: wins, and the alignment does not fit
    # A many-documents folder's sidecar serves each of its alignments.
    folder = tmp_path / "out"
    folder.mkdir()
    src, tgt, alignment, _ = _running_text_alignment(folder, None)
    (folder / "alignment.meta.json").write_text(json.dumps(ALIGNED), encoding="utf-8")
    assert AlignmentReview(src, tgt, alignment).src == sentences[0]


def test_a_sidecar_that_is_not_an_alignments_or_not_readable(tmp_path):
    src, tgt, alignment, _ = _running_text_alignment(tmp_path, {"split": True, "pairs": 3})  # not align's: ignored
    with pytest.raises(DataValidationError, match="otherwise than align read it"):
        AlignmentReview(src, tgt, alignment)
    assert AlignmentReview(src, tgt, alignment, split=True, clauses=True).languages == (None, None)
    sidecar = tmp_path / "a.jsonl.meta.json"
    sidecar.write_text("{not json", encoding="utf-8")
    with pytest.raises(DataValidationError, match=r"a\.jsonl\.meta\.json"):
        AlignmentReview(src, tgt, alignment, split=True, clauses=True)
    sidecar.unlink()
    os.mkfifo(sidecar)
    with pytest.raises(DataValidationError, match=r"a\.jsonl\.meta\.json"):  # refused unopened: no hang
        AlignmentReview(src, tgt, alignment, split=True, clauses=True)
    sidecar.unlink()
    sidecar.write_text(json.dumps({**ALIGNED, "split": "yes", "src_lang": 3}), encoding="utf-8")
    with pytest.raises(UsageError, match="it needs split"):  # only a true split is taken; clauses then refused
        AlignmentReview(src, tgt, alignment)


def test_hostile_inputs_and_outputs(tmp_path):
    src, tgt, alignment = documents(tmp_path)
    os.mkfifo(tmp_path / "fifo.en")
    with pytest.raises(DataValidationError, match="a FIFO"):  # refused unopened: no hang
        AlignmentReview(tmp_path / "fifo.en", tgt, alignment)
    with pytest.raises(DataValidationError, match="no such file"):
        AlignmentReview(tmp_path / "missing.en", tgt, alignment)
    write_alignment(Beads(BEADS, np.array(SCORES)), tmp_path / "doc.tmx", SRC, TGT, "tmx", languages=("en", "de"))
    with pytest.raises(UsageError, match="keeps only the links"):
        AlignmentReview(src, tgt, tmp_path / "doc.tmx")
    with pytest.raises(UsageError):
        AlignmentReview(src, tgt, alignment, split="yes")
    with pytest.raises(UsageError, match="clauses must be True, False or None"):
        AlignmentReview(src, tgt, alignment, split=True, clauses=1)
    with pytest.raises(UsageError, match="it needs split"):
        AlignmentReview(src, tgt, alignment, clauses=True)
    for wrong in ({"src": None}, {"tgt": 3}, {"alignment": ""}, {"src_lang": 1}):
        arguments = {"src": src, "tgt": tgt, "alignment": alignment, **wrong}
        with pytest.raises(UsageError):
            AlignmentReview(**arguments)
    review = AlignmentReview(src, tgt, alignment)
    review.reject(0)
    before = {path: path.read_bytes() for path in (src, tgt, alignment, decisions_path(alignment))}
    for out in (src, alignment, decisions_path(alignment), tmp_path / "fifo.en", tmp_path):
        with pytest.raises(UsageError):
            review.export(out)
    with pytest.raises(UsageError, match="both languages"):
        review.export(tmp_path / "out.tmx")
    assert {path: path.read_bytes() for path in before} == before
    assert not (tmp_path / "out.tmx").exists()


def test_cli_exports_a_reviewed_alignment_and_refuses_half_given_inputs(tmp_path, capsys):
    src, tgt, alignment = documents(tmp_path)
    AlignmentReview(src, tgt, alignment).split(1)
    out = tmp_path / "reviewed.jsonl"
    code, printed, err = run(
        capsys, "app", "--src", str(src), "--tgt", str(tgt), "--alignment", str(alignment), "--export", str(out)
    )
    assert code == 0, err
    assert "6 beads" in printed
    assert [json.loads(line)["src_lines"] for line in out.read_text().splitlines()][:3] == [[0], [1], [2]]
    code, _, err = run(capsys, "app", "--src", str(src), "--alignment", str(alignment))
    assert code == 2 and "all of --src, --tgt and --alignment" in err
    code, _, err = run(capsys, "app", str(tmp_path / "p.tsv"), "--src", str(src))
    assert code == 2 and "not both" in err
    code, _, err = run(capsys, "app", "--export", str(tmp_path / "x.tsv"))
    assert code == 2 and "--export needs" in err
