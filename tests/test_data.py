"""Readers: each format read back, and each kind of bad input rejected with the file and line named."""

from __future__ import annotations

import json

import pytest

from bitext_hf.data import (
    DataValidationError,
    clean_message,
    deduplicate,
    find_catalogs,
    gettext_pairs,
    read_bucc,
    read_gettext,
    read_lines,
    read_moses,
    read_mteb,
    read_tsv_pairs,
)


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


def test_moses_files_must_align(tmp_path):
    src = write(tmp_path / "c.en", "Hello\nYes\n")
    assert read_moses(src, write(tmp_path / "c.de", "Hallo\nJa\n")) == (["Hello", "Yes"], ["Hallo", "Ja"])
    with pytest.raises(DataValidationError, match=r"has 2 lines but .* has 3"):
        read_moses(src, write(tmp_path / "d.de", "Hallo\nJa\nNein\n"))


def test_mteb_jsonl_parquet_and_saved_dataset(tmp_path):
    import datasets

    rows = [{"sentence1": "Hello", "sentence2": "Hallo"}, {"sentence1": "Yes", "sentence2": "Ja"}]
    jsonl = write(tmp_path / "t.jsonl", "\n".join(json.dumps(r) for r in rows) + "\n")
    task = read_mteb(jsonl)
    assert (task.sources, task.targets, task.gold) == (["Hello", "Yes"], ["Hallo", "Ja"], [(0, 0), (1, 1)])
    datasets.Dataset.from_list(rows).to_parquet(str(tmp_path / "t.parquet"))
    assert read_mteb(tmp_path / "t.parquet").targets == ["Hallo", "Ja"]
    datasets.DatasetDict({"test": datasets.Dataset.from_list(rows)}).save_to_disk(str(tmp_path / "saved"))
    assert read_mteb(tmp_path / "saved").sources == ["Hello", "Yes"]


def test_mteb_gold_column_is_one_based(tmp_path):
    rows = [
        {"sentence1": "a", "sentence2": "x", "gold": [[1, 2], [2, 1]]},
        {"sentence1": "b", "sentence2": "y", "gold": []},
    ]
    task = read_mteb(write(tmp_path / "g.jsonl", "\n".join(json.dumps(r) for r in rows)))
    assert task.gold == [(0, 1), (1, 0)] and not task.is_aligned


def test_mteb_errors(tmp_path):
    with pytest.raises(DataValidationError, match="missing column"):
        read_mteb(write(tmp_path / "m.jsonl", json.dumps({"text": "a"}) + "\n"))
    with pytest.raises(DataValidationError, match=r"m2\.jsonl:2: invalid JSON"):
        read_mteb(write(tmp_path / "m2.jsonl", json.dumps({"sentence1": "a", "sentence2": "b"}) + "\n{oops\n"))
    with pytest.raises(DataValidationError, match="save_to_disk"):
        read_mteb(tmp_path / "mteb/tatoeba")


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
