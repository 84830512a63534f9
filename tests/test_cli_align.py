"""``bitext-hf align`` end to end with a tiny deterministic encoder: the formats, folders of documents, the
encoding of each distinct overlap once, and the input checks ``mine`` has (one line naming the file, the documented
exit code, no traceback, atomic outputs, never over an input)."""

from __future__ import annotations

import dataclasses
import json

import pytest
from cli_fakes import SumEncoder, run, use_encoder, write_lines

from bitext_hf.alignment.settings import AlignSettings
from bitext_hf.cli import EXIT_DATA, EXIT_ERROR, EXIT_OK, EXIT_USAGE
from bitext_hf.data.alignment_files import SIDECAR_KEYS, read_beads
from bitext_hf.errors import OutputWriteError

# A sentence is words with a language tag, "cat|en"; a run of sentences embeds as the sum of its words' meanings, so
# the right grouping of sentences into beads has the highest cosine.
SRC = ["cat|en", "dog|en", "tree|en", "house|en", "river|en", "sun|en", "moon|en"]
TGT = ["cat|de", "dog|de tree|de", "house|de", "extra|de", "river|de", "sun|de", "moon|de"]
EXPECTED = [([0], [0]), ([1, 2], [1]), ([3], [2]), ([], [3]), ([4], [4]), ([5], [5]), ([6], [6])]


@pytest.fixture
def encoder(monkeypatch):
    return use_encoder(monkeypatch, SumEncoder())


@pytest.fixture
def documents(tmp_path):
    return write_lines(tmp_path / "doc.en", SRC), write_lines(tmp_path / "doc.de", TGT)


def _align(capsys, tmp_path, src, tgt, *options):
    return run(capsys, "align", "--src", src, "--tgt", tgt, "--no-cache", *options)


def test_vecalign_output_covers_every_sentence_in_order(capsys, encoder, documents, tmp_path):
    out = tmp_path / "doc.align"
    code, stdout, err = _align(capsys, tmp_path, *documents, "--out", str(out))
    assert code == EXIT_OK, err
    assert read_beads(out) == EXPECTED
    lines = out.read_text().splitlines()
    assert lines[0].startswith("[0]:[0]:") and lines[3] == "[]:[3]:0.000000"
    sidecar = json.loads((tmp_path / "doc.align.meta.json").read_text())
    assert sidecar["max_align"] == 5 and sidecar["format"] == "vecalign" and "bitext-hf align" in sidecar["command"]
    assert "7 source x 7 target sentences: 7 beads, 6 of them links" in stdout


def test_each_distinct_overlap_is_encoded_once_per_run(capsys, encoder, tmp_path):
    src = write_lines(tmp_path / "a", ["x|en", "y|en", "x|en", "y|en"])
    tgt = write_lines(tmp_path / "b", ["x|de", "y|de"])
    assert _align(capsys, tmp_path, src, tgt, "--out", str(tmp_path / "o.align"), "--max-align", "3")[0] == EXIT_OK
    assert sorted(encoder.encoded) == sorted(set(encoder.encoded))


@pytest.mark.parametrize("fmt", ["tsv", "jsonl", "parquet"])
def test_table_formats_hold_the_joined_sentences(capsys, encoder, documents, tmp_path, fmt):
    out = tmp_path / f"doc.{fmt}"
    assert _align(capsys, tmp_path, *documents, "--out", str(out))[0] == EXIT_OK
    if fmt == "tsv":
        header, *rows = [line.split("\t") for line in out.read_text().splitlines()]
        assert header == ["score", "src_lines", "tgt_lines", "src", "tgt"]
        assert rows[1][1:] == ["1,2", "1", "dog|en tree|en", "dog|de tree|de"] and rows[3][1:3] == ["", "3"]
    else:
        import pandas as pd

        table = pd.read_json(out, lines=True) if fmt == "jsonl" else pd.read_parquet(out)
        assert list(table.columns) == ["score", "src_lines", "tgt_lines", "src", "tgt"]
        assert [list(x) for x in table.src_lines] == [xs for xs, _ in EXPECTED]
        assert table.src[1] == "dog|en tree|en" and table.tgt[3] == "extra|de" and table.src[3] == ""


def test_without_out_the_beads_are_printed(capsys, encoder, documents, tmp_path):
    code, stdout, _ = _align(capsys, tmp_path, *documents)
    assert code == EXIT_OK and stdout.splitlines()[1].startswith("[1, 2]:[1]:")


def test_folders_of_documents_align_by_name_into_a_folder(capsys, encoder, tmp_path):
    for side, sentences, short in (("en", SRC, SRC[:4]), ("de", TGT, TGT[:3])):
        (tmp_path / side).mkdir()
        write_lines(tmp_path / side / "one", sentences)
        write_lines(tmp_path / side / "two", short)
    out = tmp_path / "aligned"
    code, _, err = _align(capsys, tmp_path, str(tmp_path / "en"), str(tmp_path / "de"), "--out", str(out))
    assert code == EXIT_OK, err
    assert sorted(p.name for p in out.iterdir()) == ["alignment.meta.json", "one.align", "two.align"]
    assert read_beads(out / "one.align") == EXPECTED
    assert read_beads(out / "two.align") == EXPECTED[:3]
    # Both documents' overlaps in one encoding call per side: the shared sentences are encoded once.
    assert sorted(encoder.encoded) == sorted(set(encoder.encoded))
    code, stdout, _ = _align(capsys, tmp_path, str(tmp_path / "en"), str(tmp_path / "de"))
    assert code == EXIT_OK and stdout.splitlines()[0] == "# one" and "# two" in stdout.splitlines()


def _no_traceback(err: str) -> bool:
    return "Traceback" not in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize(
    "make, code, says",
    [
        (lambda d: ["--src", str(d / "missing"), "--tgt", str(d / "doc.de")], EXIT_DATA, "missing"),
        (lambda d: ["--src", str(d / "blank"), "--tgt", str(d / "doc.de")], EXIT_DATA, "blank:2: empty line"),
        (lambda d: ["--src", str(d / "binary"), "--tgt", str(d / "doc.de")], EXIT_DATA, "binary"),
        (
            lambda d: ["--src", str(d / "doc.en"), "--tgt", str(d / "doc.de"), "--out", str(d / "doc.en")],
            EXIT_USAGE,
            "is the input",
        ),
        (
            lambda d: ["--src", str(d / "tab"), "--tgt", str(d / "doc.de"), "--out", str(d / "o.tsv")],
            EXIT_DATA,
            "tab:1: the sentence contains a tab",
        ),
        (
            lambda d: ["--src", str(d / "doc.en"), "--tgt", str(d / "doc.de"), "--max-align", "1"],
            EXIT_USAGE,
            "max_align",
        ),
        (
            lambda d: ["--src", str(d / "doc.en"), "--tgt", str(d / "doc.de"), "--format", "tsv"],
            EXIT_USAGE,
            "there is no --out",
        ),
        (lambda d: ["--src", str(d), "--tgt", str(d / "doc.de")], EXIT_USAGE, "both be files or both be folders"),
        (
            lambda d: ["--src", str(d / "doc.en"), "--tgt", str(d / "doc.de"), "--out", str(d)],
            EXIT_USAGE,
            "is a directory",
        ),
    ],
)
def test_hostile_inputs_are_one_line_with_the_documented_code(capsys, encoder, documents, tmp_path, make, code, says):
    (tmp_path / "blank").write_text("a|en\n\nb|en\n")
    (tmp_path / "binary").write_bytes(b"a\x00b\n")
    (tmp_path / "tab").write_text("a\tb|en\n")
    before = {path: path.read_bytes() for path in tmp_path.iterdir() if path.is_file()}
    got, _, err = run(capsys, "align", "--no-cache", *make(tmp_path))
    assert got == code and says in err and _no_traceback(err), err
    assert encoder.encoded == []  # refused before any encoding
    assert {path: path.read_bytes() for path in tmp_path.iterdir() if path.is_file()} == before


def test_folders_whose_names_differ_are_refused(capsys, encoder, tmp_path):
    for side, name in (("en", "one"), ("de", "other")):
        (tmp_path / side).mkdir()
        write_lines(tmp_path / side / name, SRC)
    code, _, err = _align(capsys, tmp_path, str(tmp_path / "en"), str(tmp_path / "de"), "--out", str(tmp_path / "o"))
    assert code == EXIT_USAGE and "same names" in err and "one, other" in err and _no_traceback(err)
    assert not (tmp_path / "o").exists()


def test_a_failed_write_leaves_no_output_behind(capsys, encoder, monkeypatch, tmp_path):
    for side, sentences in (("en", SRC), ("de", TGT)):
        (tmp_path / side).mkdir()
        for name in ("one", "two"):
            write_lines(tmp_path / side / name, sentences)
    from bitext_hf.data import alignment_files as output

    real, calls = output.write_alignment, []

    def failing(alignment, path, *args):
        calls.append(path)
        if len(calls) == 2:
            raise OutputWriteError(f"{path}: no space left on device; nothing was written")
        real(alignment, path, *args)

    monkeypatch.setattr(output, "write_alignment", failing)
    out = tmp_path / "aligned"
    code, _, err = _align(capsys, tmp_path, str(tmp_path / "en"), str(tmp_path / "de"), "--out", str(out))
    assert code == EXIT_ERROR and "two.align: no space left" in err
    assert not out.exists()  # the folder the run made goes with its files


def test_help_says_the_exit_codes_and_the_format(capsys):
    from bitext_hf.cli import main

    with pytest.raises(SystemExit):
        main(["align", "--help"])
    text = capsys.readouterr().out
    assert "exit codes" in text and "  3  bad input data" in text and "[0, 1]:[2]:0.734215" in text
    for option in ("--max-align", "--window", "--top-k", "--skip", "--format", "--threads", "--cache-dir"):
        assert option in text


def test_lists_of_documents_pair_by_line(capsys, encoder, tmp_path):
    for side, sentences in (("en", SRC), ("de", TGT)):
        (tmp_path / side).mkdir()
        write_lines(tmp_path / side / f"one.{side}", sentences)
        write_lines(tmp_path / side / f"two.{side}", sentences[:2])
        write_lines(tmp_path / f"{side}.list", [f"{side}/one.{side}", f"{side}/two.{side}"])
    out = tmp_path / "aligned"
    args = ["--src-docs", str(tmp_path / "en.list"), "--tgt-docs", str(tmp_path / "de.list"), "--out", str(out)]
    code, _, err = run(capsys, "align", "--no-cache", *args)
    assert code == EXIT_OK, err
    assert sorted(p.name for p in out.iterdir()) == ["alignment.meta.json", "one.en.align", "two.en.align"]
    assert read_beads(out / "one.en.align") == EXPECTED
    assert json.loads((out / "alignment.meta.json").read_text())["documents"] == ["one.en", "two.en"]


@pytest.mark.parametrize(
    "tgt_list, code, says",
    [
        (["de/one.de"], EXIT_DATA, "lists 2 documents but"),
        (["de/one.de", "de/missing"], EXIT_DATA, "missing"),
    ],
)
def test_lists_that_do_not_pair_up_are_refused(capsys, encoder, tmp_path, tgt_list, code, says):
    for side, sentences in (("en", SRC), ("de", TGT)):
        (tmp_path / side).mkdir()
        write_lines(tmp_path / side / f"one.{side}", sentences)
        write_lines(tmp_path / side / f"two.{side}", sentences)
    write_lines(tmp_path / "en.list", ["en/one.en", "en/two.en"])
    write_lines(tmp_path / "de.list", tgt_list)
    args = ["--src-docs", str(tmp_path / "en.list"), "--tgt-docs", str(tmp_path / "de.list"), "--out", str(tmp_path)]
    got, _, err = run(capsys, "align", "--no-cache", *args)
    assert got == code and says in err and _no_traceback(err), err
    assert encoder.encoded == []


def test_the_same_document_name_twice_in_a_list_is_refused(capsys, encoder, tmp_path):
    for side, sentences in (("en", SRC), ("de", TGT)):
        for folder in ("a", "b"):
            (tmp_path / folder).mkdir(exist_ok=True)
            write_lines(tmp_path / folder / f"doc.{side}", sentences)
        write_lines(tmp_path / f"{side}.list", [f"a/doc.{side}", f"b/doc.{side}"])
    args = ["--src-docs", str(tmp_path / "en.list"), "--tgt-docs", str(tmp_path / "de.list"), "--out", str(tmp_path)]
    code, _, err = run(capsys, "align", "--no-cache", *args)
    assert code == EXIT_DATA and "en.list:2: a second document named doc.en" in err and _no_traceback(err)


def test_files_and_lists_together_are_a_usage_error(capsys, encoder, documents, tmp_path):
    code, _, err = run(capsys, "align", "--src", documents[0], "--src-docs", documents[0], "--tgt-docs", documents[1])
    assert code == EXIT_USAGE and "either --src and --tgt, or --src-docs" in err


def test_the_sidecar_keeps_every_setting_of_the_search():
    """The sidecar's format (data layer) names the search's settings itself; a setting added to the engine and not to
    the format would be dropped from every dataset card."""
    settings = [field.name for field in dataclasses.fields(AlignSettings)]
    assert [key for key in SIDECAR_KEYS if key in settings] == settings
