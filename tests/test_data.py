"""Readers: each format read back, and each kind of bad input rejected with the file and line named."""

from __future__ import annotations

import bz2
import gzip
import io
import json
import lzma
import subprocess
import sys

import numpy as np
import pytest
import zstandard

from bitext_hf.data import (
    DataValidationError,
    clean_message,
    deduplicate,
    find_catalogs,
    gettext_pairs,
    read_bucc,
    read_embeddings,
    read_gettext,
    read_lines,
    read_moses,
    read_mteb,
    read_tsv_pairs,
)
from bitext_hf.errors import UsageError


def write(path, data: bytes | str):
    path.write_bytes(data if isinstance(data, bytes) else data.encode("utf-8"))
    return path


def test_read_lines_handles_bom_crlf_and_final_newline(tmp_path):
    path = write(tmp_path / "a.txt", b"\xef\xbb\xbfHello world\r\nZweite Zeile\n")
    assert read_lines(path) == ["Hello world", "Zweite Zeile"]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", r"a\.txt: file is empty"),
        (b"\n\n  \n", "file is empty"),
        (b"ok\nbad \x00 byte\n", r"a\.txt:2: NUL byte"),
        (b"ok\nfine\ncaf\xe9\n", r"a\.txt:3: invalid UTF-8"),
        (b"one\n\nthree\n", r"a\.txt:2: empty line"),
        (b"short\n" + b"x" * 10_001 + b"\n", r"a\.txt:2: line of 10001 characters"),
    ],
)
def test_read_lines_rejects_bad_input_naming_file_and_line(tmp_path, data, message):
    with pytest.raises(DataValidationError, match=message):
        read_lines(write(tmp_path / "a.txt", data))


def test_read_lines_cr_only_file_is_one_sentence_a_line(tmp_path):
    # Classic-Mac line ends were read as one giant sentence.
    assert read_lines(write(tmp_path / "mac.txt", b"Hello world\rZweite Zeile\rDritte\r")) == [
        "Hello world",
        "Zweite Zeile",
        "Dritte",
    ]
    assert read_lines(write(tmp_path / "mixed.txt", b"a\r\nb\rc\nd")) == ["a", "b", "c", "d"]
    with pytest.raises(DataValidationError, match=r"cr\.txt:2: empty line"):
        read_lines(write(tmp_path / "cr.txt", b"a\r\rc\r"))


def test_read_lines_splits_only_on_line_ends(tmp_path):
    # \v, \f, \x1c and U+2028 sit inside sentences (str.splitlines would split there and shift line numbers)
    path = write(tmp_path / "a.txt", "one\x0btwo\x0cthree\x1c\u2028four\nfive\n")
    assert read_lines(path) == ["one\x0btwo\x0cthree\x1c\u2028four", "five"]


def test_read_lines_tolerates_one_trailing_empty_line(tmp_path):
    assert read_lines(write(tmp_path / "a.txt", "Hello\nWorld\n\n")) == ["Hello", "World"]
    assert read_lines(write(tmp_path / "b.txt", "Hello\r\nWorld\r\n \r\n")) == ["Hello", "World"]
    with pytest.raises(DataValidationError, match=r"c\.txt:3: empty line"):
        read_lines(write(tmp_path / "c.txt", "Hello\nWorld\n\n\n"))


@pytest.mark.parametrize("suffix", [".gz", ".xz", ".bz2", ".zst"])
def test_read_lines_compressed(tmp_path, suffix):
    compress = {".gz": gzip.compress, ".xz": lzma.compress, ".bz2": bz2.compress}.get(
        suffix, zstandard.ZstdCompressor().compress
    )
    path = write(tmp_path / f"c.de{suffix}", compress(b"Hallo\nJa\n"))
    assert read_lines(path) == ["Hallo", "Ja"]
    write(tmp_path / f"bad{suffix}", compress(b"Hallo\n\nJa\n"))
    with pytest.raises(DataValidationError, match=rf"bad\{suffix}:2: empty line"):
        read_lines(tmp_path / f"bad{suffix}")


def test_read_lines_from_stdin(tmp_path):

    script = "import sys; from bitext_hf.data import read_lines; print(read_lines(sys.argv[1]))"
    result = subprocess.run(
        [sys.executable, "-c", script, "-"], input=b"Hallo\r\nJa\r\n", capture_output=True, timeout=120
    )
    assert result.stdout.decode().strip() == "['Hallo', 'Ja']", result.stderr
    result = subprocess.run([sys.executable, "-c", script, "-"], input=b"a\n\nb\n", capture_output=True, timeout=120)
    assert "<stdin>:2: empty line" in result.stderr.decode()


def test_read_lines_missing_file(tmp_path):
    with pytest.raises(DataValidationError, match="no such file"):
        read_lines(tmp_path / "missing.txt")


def test_tsv_pairs_with_header_and_errors(tmp_path):
    assert read_tsv_pairs(write(tmp_path / "p.tsv", "src\ttgt\nHello\tHallo\nYes\tJa\n")) == (
        ["Hello", "Yes"],
        ["Hallo", "Ja"],
    )
    with pytest.raises(DataValidationError, match=r"p2\.tsv:2: expected at least 2"):
        read_tsv_pairs(write(tmp_path / "p2.tsv", "Hello\tHallo\nno tab here\n"))
    with pytest.raises(DataValidationError, match=r"p3\.tsv:1: empty target"):
        read_tsv_pairs(write(tmp_path / "p3.tsv", "Hello\t \n"))


def test_tsv_pairs_read_the_columns_a_header_names_anywhere_in_it(tmp_path):
    # mine's own header: the sentences are in columns 3 and 4, not the score and the line numbers.
    mined = write(tmp_path / "m.tsv", "score\tsrc_index\ttgt_index\tsrc\ttgt\n1.2\t0\t3\tHello\tHallo\n")
    assert read_tsv_pairs(mined) == (["Hello"], ["Hallo"])
    assert read_tsv_pairs(write(tmp_path / "r.tsv", "id\ttarget\tsource\n7\tJa\tYes\n")) == (["Yes"], ["Ja"])


def test_read_pairs_reads_csv_jsonl_and_parquet_by_their_column_names(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from bitext_hf.data.readers import read_pairs

    csv_text = 'score,src_index,tgt_index,src,tgt\n1.0,0,0,"two\nlines, quoted",Zwei\n'
    assert read_pairs(write(tmp_path / "p.csv", csv_text)) == (["two\nlines, quoted"], ["Zwei"])
    rows = [{"sentence2": "Hallo", "sentence1": "Hello"}, {"sentence2": "Ja", "sentence1": "Yes"}]
    jsonl = write(tmp_path / "p.jsonl.gz", gzip.compress("".join(json.dumps(r) + "\n" for r in rows).encode()))
    assert read_pairs(jsonl) == (["Hello", "Yes"], ["Hallo", "Ja"])
    pq.write_table(pa.table({"en": ["Open"], "fr": ["Ouvrir"]}), tmp_path / "p.parquet")  # data gettext's two columns
    assert read_pairs(tmp_path / "p.parquet") == (["Open"], ["Ouvrir"])


@pytest.mark.parametrize(
    ("name", "data", "message"),
    [
        (
            "a.csv",
            "a,b,c\n1,2,3\n",
            "a.csv: cannot tell the source and target columns among a, b, c; expected src/tgt",
        ),
        ("b.jsonl", '{"src": "x", "tgt": "y"}\n[1, 2]\n', "b.jsonl:2: expected a JSON object, got list"),
        ("c.jsonl", '{"src": "x", "tgt": "y"}\n{"src": "x"\n', "c.jsonl:2: not valid JSON"),
        ("d.jsonl", '{"src": "x", "tgt": 3}\n', "d.jsonl:1: target sentence (tgt) is int"),
        ("e.csv", "src,tgt\nx\n", "e.csv:2: target sentence (tgt) is missing"),
        ("f.parquet", "not parquet at all", "f.parquet: not a readable Parquet file"),
        ("g.csv", "src,tgt\n", "g.csv: no sentence pairs"),
    ],
)
def test_read_pairs_refuses_in_one_line_naming_the_file(tmp_path, name, data, message):
    from bitext_hf.data.readers import read_pairs

    with pytest.raises(DataValidationError) as raised:
        read_pairs(write(tmp_path / name, data))
    assert message in str(raised.value) and "\n" not in str(raised.value), raised.value


def test_moses_files_must_align(tmp_path):
    src = write(tmp_path / "c.en", "Hello\nYes\n")
    assert read_moses(src, write(tmp_path / "c.de", "Hallo\nJa\n")) == (["Hello", "Yes"], ["Hallo", "Ja"])
    with pytest.raises(DataValidationError, match=r"has 2 lines but .* has 3"):
        read_moses(src, write(tmp_path / "d.de", "Hallo\nJa\nNein\n"))


def test_mteb_jsonl_parquet_and_saved_dataset(tmp_path):
    import datasets

    rows = [{"sentence1": "Hello", "sentence2": "Hallo"}, {"sentence1": "Yes", "sentence2": "Ja"}]
    jsonl = write(tmp_path / "t.jsonl", "\n".join(json.dumps(r) for r in rows) + "\n")
    task = read_mteb(jsonl)["default"]
    assert (task.sources, task.targets, task.gold) == (["Hello", "Yes"], ["Hallo", "Ja"], [(0, 0), (1, 1)])
    datasets.Dataset.from_list(rows).to_parquet(str(tmp_path / "t.parquet"))
    assert read_mteb(tmp_path / "t.parquet")["default"].targets == ["Hallo", "Ja"]
    datasets.DatasetDict({"test": datasets.Dataset.from_list(rows)}).save_to_disk(str(tmp_path / "saved"))
    assert read_mteb(tmp_path / "saved")["default"].sources == ["Hello", "Yes"]


def test_mteb_gold_column_is_one_based(tmp_path):
    rows = [
        {"sentence1": "a", "sentence2": "x", "gold": [[1, 2], [2, 1]]},
        {"sentence1": "b", "sentence2": "y", "gold": []},
    ]
    task = read_mteb(write(tmp_path / "g.jsonl", "\n".join(json.dumps(r) for r in rows)))["default"]
    assert task.gold == [(0, 1), (1, 0)] and not task.is_aligned


def test_mteb_errors(tmp_path):
    with pytest.raises(DataValidationError, match="missing column"):
        read_mteb(write(tmp_path / "m.jsonl", json.dumps({"text": "a"}) + "\n"))
    with pytest.raises(DataValidationError, match=r"m2\.jsonl:2: invalid JSON"):
        read_mteb(write(tmp_path / "m2.jsonl", json.dumps({"sentence1": "a", "sentence2": "b"}) + "\n{oops\n"))
    with pytest.raises(DataValidationError, match="save_to_disk"):
        read_mteb(tmp_path / "mteb/tatoeba")
    (tmp_path / "folder").mkdir()
    with pytest.raises(DataValidationError, match=r"folder: a folder, but not one saved with"):
        read_mteb(tmp_path / "folder")


def test_bucc_files(tmp_path):
    src = write(tmp_path / "de-en.de", "de-1\tHallo Welt\nde-2\tJa\n")
    tgt = write(tmp_path / "de-en.en", "en-1\tYes\nen-2\tHello world\n")
    gold = write(tmp_path / "de-en.gold", "de-1\ten-2\nde-2\ten-1\n")
    task = read_bucc(src, tgt, gold)
    assert task.gold == [(0, 1), (1, 0)] and task.source_ids == ["de-1", "de-2"]
    with pytest.raises(DataValidationError, match=r"bad\.gold:1"):
        read_bucc(src, tgt, write(tmp_path / "bad.gold", "de-9\ten-1\n"))
    with pytest.raises(DataValidationError, match="duplicate sentence id"):
        read_bucc(write(tmp_path / "dup.de", "a\tx\na\ty\n"), tgt)


def test_gettext_po_and_mo_catalogs(tmp_path):
    import polib

    catalog = polib.POFile()
    catalog.metadata = {"Content-Type": "text/plain; charset=UTF-8"}
    catalog.append(polib.POEntry(msgid="_Open File", msgstr="Datei _öffnen"))
    catalog.append(polib.POEntry(msgid="Untranslated", msgstr=""))
    catalog.append(polib.POEntry(msgid="Fuzzy one", msgstr="Unscharf", flags=["fuzzy"]))
    catalog.append(
        polib.POEntry(msgid="%d file", msgid_plural="%d files", msgstr_plural={0: "%d Datei", 1: "%d Dateien"})
    )
    locale = tmp_path / "locale" / "de" / "LC_MESSAGES"
    locale.mkdir(parents=True)
    catalog.save(str(locale / "app.po"))
    catalog.save_as_mofile(str(locale / "app.mo"))
    expected = [("_Open File", "Datei _öffnen"), ("%d file", "%d Datei")]
    assert read_gettext(locale / "app.po") == expected
    assert sorted(read_gettext(locale / "app.mo")) == sorted(expected)
    assert find_catalogs("de", [tmp_path / "locale"]) == [locale / "app.mo", locale / "app.po"]
    # cleaned, placeholder-only messages dropped, each pair once
    assert sorted(gettext_pairs("de", [tmp_path / "locale"])) == [
        ("%d file", "%d Datei"),
        ("Open File", "Datei öffnen"),
    ]
    assert gettext_pairs("de", [tmp_path / "locale"], min_words=2) == [("Open File", "Datei öffnen")]
    with pytest.raises(DataValidationError, match="no gettext catalogs"):
        gettext_pairs("xx", [tmp_path / "locale"])


def test_corrupt_catalog_is_reported(tmp_path):
    with pytest.raises(DataValidationError, match="not a readable gettext catalog"):
        read_gettext(write(tmp_path / "broken.mo", b"\x00\x01garbage"))


def test_clean_message_and_deduplicate():
    assert clean_message("  Save &As…\n now ") == "Save As… now"
    assert clean_message("Fish && Chips") == "Fish & Chips"
    assert deduplicate(["a", "b", "a", "c", "b"]) == (["a", "b", "c"], [0, 1, 0, 2, 1])


def _npy(array) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=True)
    return buffer.getvalue()


def test_read_embeddings_memory_maps_a_2d_array(tmp_path):

    array = np.arange(12, dtype=np.float32).reshape(3, 4)
    loaded = read_embeddings(write(tmp_path / "e.npy", _npy(array)))
    assert isinstance(loaded, np.memmap) and np.array_equal(loaded, array)

    assert np.array_equal(read_embeddings(write(tmp_path / "e.npy.gz", gzip.compress(_npy(array)))), array)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (lambda: b"", r"e\.npy: empty file \(0 bytes\)"),
        (lambda: _npy(np.ones((3, 4), np.float32))[:-10], r"e\.npy: truncated"),
        (lambda: _npy(np.ones((3, 4), np.float32))[:40], r"e\.npy: truncated"),
        (lambda: _npy(np.array([{"a": 1}], dtype=object)), r"e\.npy: holds pickled Python objects"),
        (lambda: _npy(np.array([["a", "b"]])), r"e\.npy: dtype <U1 is not numeric"),
        (lambda: _npy(np.ones(4, np.float32)), r"e\.npy: expected a 2-D array .* shape \(4,\)"),
        (lambda: _npy(np.ones((0, 4), np.float32)), r"e\.npy: no embeddings"),
        (lambda: b"Hello\nWorld\n", r"e\.npy: not a \.npy file \(no NumPy header\)"),
    ],
)
def test_read_embeddings_rejects_bad_files(tmp_path, data, message):
    with pytest.raises(DataValidationError, match=message):
        read_embeddings(write(tmp_path / "e.npy", data()))


def test_mteb_one_task_per_subset(tmp_path):
    rows = [
        {"lang": "deu-eng", "sentence1": "Hallo", "sentence2": "Hello"},
        {"lang": "fra-eng", "sentence1": "Bonjour", "sentence2": "Hello"},
        {"lang": "deu-eng", "sentence1": "Ja", "sentence2": "Yes"},
    ]
    path = write(tmp_path / "t.jsonl", "\n".join(json.dumps(r) for r in rows) + "\n")
    tasks = read_mteb(path)
    assert list(tasks) == ["deu-eng", "fra-eng"]
    assert (tasks["deu-eng"].sources, tasks["deu-eng"].name) == (["Hallo", "Ja"], "t/deu-eng")
    assert tasks["fra-eng"].gold == [(0, 0)]
    assert list(read_mteb(path, subset="fra-eng")) == ["fra-eng"]
    with pytest.raises(UsageError, match=r"no subset 'xx'; valid subsets: deu-eng, fra-eng"):
        read_mteb(path, subset="xx")
    with pytest.raises(UsageError, match=r"valid subsets: default"):
        read_mteb(write(tmp_path / "d.jsonl", json.dumps({"sentence1": "a", "sentence2": "b"})), subset="deu-eng")


def test_mteb_columns_map_flores_names(tmp_path):
    rows = [{"sentence_eng_Latn": "Hello", "sentence_deu_Latn": "Hallo", "id": 1}]
    path = write(tmp_path / "flores.jsonl", "\n".join(json.dumps(r) for r in rows))
    task = read_mteb(path, columns=("sentence_deu_Latn", "sentence_eng_Latn"))["default"]
    assert (task.sources, task.targets) == (["Hallo"], ["Hello"])
    with pytest.raises(UsageError, match=r"no column\(s\) sentence_fra_Latn .* found sentence_eng_Latn"):
        read_mteb(path, columns=("sentence_fra_Latn", "sentence_eng_Latn"))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            '{"sentence1": "a", "sentence2": "b"}\n["a", "b"]\n',
            r"m\.jsonl:2: expected a JSON object per row, got list",
        ),
        ('"just a string"\n', r"m\.jsonl:1: expected a JSON object"),
        ('{"sentence1": "a", "sentence2": "b"}\n{"sentence1": "c"}\n', r"m\.jsonl:2: empty or missing sentence2"),
        ('{"sentence1": "a", "sentence2": "x", "gold": [1, 2]}\n', r"m\.jsonl:1: gold must be a list of \[i, j\]"),
        ('{"sentence1": "a", "sentence2": "x", "gold": [[1, "b"]]}\n', r"m\.jsonl:1: gold must be"),
        ('{"sentence1": "a", "sentence2": "x", "gold": "oops"}\n', r"m\.jsonl:1: gold must be"),
        (
            '{"sentence1": "a", "sentence2": "x"}\n{"sentence1": "b", "gold": [[1, 3]]}\n',
            r"m\.jsonl:2: gold pair \(1, 3\) out of range",
        ),
    ],
)
def test_mteb_bad_rows_name_file_and_line(tmp_path, text, message):
    with pytest.raises(DataValidationError, match=message):
        read_mteb(write(tmp_path / "m.jsonl", text))


def test_mteb_csv_with_bom_and_gold_text(tmp_path):
    path = write(tmp_path / "t.csv", b'\xef\xbb\xbfsentence1,sentence2\r\nHello,Hallo\r\n"Yes, indeed",Ja\r\n')
    task = read_mteb(path)["default"]
    assert (task.sources, task.targets) == (["Hello", "Yes, indeed"], ["Hallo", "Ja"])
    gold = write(tmp_path / "g.csv", 'sentence1,sentence2,gold\na,x,"[[1, 2], [2, 1]]"\nb,y,\n')
    assert read_mteb(gold)["default"].gold == [(0, 1), (1, 0)]
    with pytest.raises(DataValidationError, match=r"bad\.csv:3: empty or missing sentence2"):
        read_mteb(write(tmp_path / "bad.csv", "sentence1,sentence2\na,b\nc\n"))
