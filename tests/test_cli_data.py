"""``bitext-hf data gettext``: pairs and language counts from gettext catalogs, on a tiny catalog tree the tests write
(tests/gettext_catalogs.py) and, when this machine has any, on its real catalogs."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import polib
import pytest
from gettext_catalogs import write_catalogs

from bitext_hf.cli import EXIT_DATA, EXIT_OK, EXIT_USAGE, main
from bitext_hf.data import load_pairs
from bitext_hf.data.gettext import (
    collect_gettext_pairs,
    find_catalogs,
    gettext_languages,
    gettext_pairs,
    locale_roots,
)
from bitext_hf.errors import DataValidationError, UsageError


def write_catalog(path: Path, entries: list[tuple[str, str]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    catalog = polib.POFile()
    catalog.metadata = {"Content-Type": "text/plain; charset=UTF-8"}
    for msgid, msgstr in entries:
        catalog.append(polib.POEntry(msgid=msgid, msgstr=msgstr))
    catalog.save_as_mofile(str(path))


@pytest.fixture
def root(tmp_path):
    """German and French for three applications, French with one more catalog, and a small Wolof one."""
    locale = write_catalogs(tmp_path / "locale")
    write_catalog(locale / "fr" / "LC_MESSAGES" / "zz-extra.mo", [("Save the file", "Enregistrer le fichier")] * 1)
    write_catalog(locale / "wo" / "LC_MESSAGES" / "app.mo", [("_Quit the game", "Génn ci po wi"), ("%d", "%d")])
    return locale


def run(capsys, *argv):
    code = main(["data", "gettext", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def hermetic(root: Path) -> list[str]:
    return ["--no-system-catalogs", "--catalogs", str(root)]


def test_tsv_is_what_gettext_pairs_returns_and_what_the_data_spec_reads(capsys, root, tmp_path):
    out_file = tmp_path / "pairs.tsv"
    code, out, err = run(capsys, "--lang", "fr", "--out", str(out_file), *hermetic(root))
    assert code == EXIT_OK, err
    expected = gettext_pairs("fr", [root])
    assert len(expected) == 20  # 7 + 6 + 6 messages and the extra catalog's; the repeated English is kept once
    assert out_file.read_text(encoding="utf-8").splitlines() == [f"{en}\t{fr}" for en, fr in expected]
    assert out.strip().splitlines()[-1] == f"wrote 20 English-fr pairs from 4 catalogs to {out_file}"
    loaded = load_pairs(f"fr={out_file}")
    assert (loaded.src_lang, loaded.tgt_lang) == ("fr", "en") and list(zip(loaded.tgt, loaded.src)) == expected


def test_list_counts_pairs_and_sorts_most_first(capsys, root):
    code, out, _ = run(capsys, "--list", "--quiet", *hermetic(root))
    lines = out.strip().splitlines()
    assert code == EXIT_OK
    assert [line.split()[:2] for line in lines[:-1]] == [["fr", "20"], ["de", "19"], ["wo", "1"]]
    assert lines[-1] == "3 language(s) with pairs, 40 pairs in all, from 8 catalogs"
    code, out, _ = run(capsys, "--list", "--lang", "wo", "de", "--quiet", *hermetic(root))
    assert [line.split()[0] for line in out.strip().splitlines()[:-1]] == ["de", "wo"]


@pytest.mark.parametrize("terminal", [True, False])
def test_list_draws_a_progress_bar_on_a_terminal_or_a_pipe_and_not_with_quiet(capsys, root, monkeypatch, terminal):
    """Reading every catalog takes up to a minute: the wait shows its progress wherever stderr goes (a terminal, a
    pipe or a log), never one silent line; --quiet alone turns it off."""
    monkeypatch.setattr(sys.stderr, "isatty", lambda: terminal, raising=False)
    code, out, err = run(capsys, "--list", *hermetic(root))
    assert code == EXIT_OK and "catalogs: 100%" in err and "3/3" in err and "catalogs:" not in out
    assert "catalogs:" not in run(capsys, "--list", "--quiet", *hermetic(root))[2]


def test_several_languages_formats_and_max_pairs(capsys, root, tmp_path):
    import pyarrow.parquet as pq

    pattern = str(tmp_path / "pairs.{lang}.jsonl")
    code, out, _ = run(capsys, "--lang", "de", "fr", "--out", pattern, "--max-pairs", "5", *hermetic(root))
    assert code == EXIT_OK and "wrote 10 English-de/fr pairs from 7 catalogs" in out
    for lang in ("de", "fr"):
        rows = [json.loads(line) for line in (tmp_path / f"pairs.{lang}.jsonl").read_text().splitlines()]
        assert [(row["en"], row[lang]) for row in rows] == gettext_pairs(lang, [root])[:5]
    parquet = tmp_path / "de.data"
    assert run(capsys, "--lang", "de", "--out", str(parquet), "--format", "parquet", *hermetic(root))[0] == EXIT_OK
    assert pq.read_table(parquet).to_pydict() == {
        "en": [en for en, _ in gettext_pairs("de", [root])],
        "de": [de for _, de in gettext_pairs("de", [root])],
    }
    code, out, err = run(capsys, "--lang", "wo", "--out", "-", "--format", "csv", *hermetic(root))
    assert code == EXIT_OK and out.splitlines() == ["en,wo", "Quit the game,Génn ci po wi"]
    assert "wrote 1 English-wo pairs" in err, "the report goes to stderr when the pairs go to stdout"


def test_run_gettext_is_the_command_in_one_call(capsys, root, tmp_path):
    from bitext_hf.jobs.gettext import GettextConfig, LanguageCount, run_gettext

    by_command = tmp_path / "command.{lang}.jsonl"
    assert run(capsys, "--lang", "de", "wo", "--out", str(by_command), "--max-pairs", "5", *hermetic(root))[0] == 0
    config = GettextConfig(
        lang=["de", "wo"],
        out=str(tmp_path / "call.{lang}.jsonl"),
        catalogs=[root],
        no_system_catalogs=True,
        max_pairs=5,
    )
    result = run_gettext(config)
    assert [(item.lang, item.pairs, item.format) for item in result.written] == [
        ("de", 5, "jsonl"),
        ("wo", 1, "jsonl"),
    ]
    for lang in ("de", "wo"):
        assert (tmp_path / f"call.{lang}.jsonl").read_bytes() == (tmp_path / f"command.{lang}.jsonl").read_bytes()
    listed = run_gettext(GettextConfig(list=True, catalogs=[root], no_system_catalogs=True, quiet=True))
    assert listed.listed == [LanguageCount("fr", 20, 4), LanguageCount("de", 19, 3), LanguageCount("wo", 1, 1)]
    assert listed.left_out == []
    with pytest.raises(UsageError, match=r"lang=\['\.\./fr'\] \(--lang\): each must be a language folder name"):
        GettextConfig(lang=["../fr"], out="pairs.tsv")


@pytest.mark.parametrize("listing", [False, True])
def test_each_language_is_listed_once_and_the_catalogs_read_are_those_protected(monkeypatch, root, tmp_path, listing):
    import bitext_hf.data.gettext as gettext_data
    import bitext_hf.jobs.gettext as gettext_job
    from bitext_hf.jobs.gettext import GettextConfig, run_gettext

    listed, read, protected = [], [], []

    def find_catalogs(lang, roots=None):
        found = real_find(lang, roots)
        listed.append(lang)
        return found

    def read_catalog(path, **options):
        read.append(path)
        return real_read(path, **options)

    def job_run(config, *, inputs=(), **options):
        protected.extend(inputs)
        return real_job_run(config, inputs=inputs, **options)

    real_find, real_read, real_job_run = gettext_data.find_catalogs, gettext_data.read_catalog, gettext_job.job_run
    monkeypatch.setattr(gettext_job, "find_catalogs", find_catalogs)
    monkeypatch.setattr(gettext_job, "job_run", job_run)
    monkeypatch.setattr(gettext_data, "read_catalog", read_catalog)
    monkeypatch.setattr(gettext_data, "find_catalogs", lambda *_: pytest.fail("the catalogs were listed again"))
    what = {"list": True} if listing else {"out": str(tmp_path / "{lang}.tsv")}
    result = run_gettext(
        GettextConfig(lang=["de", "fr"], catalogs=[root], no_system_catalogs=True, quiet=True, **what)
    )
    assert listed == ["de", "fr"]  # once each, by the job
    assert sum(row.catalogs for row in result.languages) == len(read) == 7
    if not listing:
        assert sorted(read) == sorted(protected)  # what is read is what was protected


def test_bad_input_is_one_line_and_writes_nothing(capsys, root, tmp_path):
    out_file = tmp_path / "pairs.tsv"
    catalog = root / "wo" / "LC_MESSAGES" / "app.mo"
    before = catalog.read_bytes()
    cases = [
        (EXIT_DATA, ["--lang", "xx", "--out", str(out_file)], "no gettext catalogs for xx"),
        (EXIT_DATA, ["--lang", "fr", "--out", str(out_file), "--catalogs", str(tmp_path / "none")], "no such folder"),
        (EXIT_USAGE, ["--lang", "de", "fr", "--out", str(out_file)], "{lang}"),
        (EXIT_USAGE, ["--lang", "wo", "--out", str(catalog)], "is the input"),
        (EXIT_USAGE, ["--lang", "fr", "--out", str(catalog), "--format", "tsv"], "is a gettext catalog"),
        (EXIT_USAGE, ["--lang", "wo", "--out", str(tmp_path / "pairs.doc")], "output format"),
        (EXIT_USAGE, ["--lang", "wo"], "--out"),
        # Wolof has a pair until --min-words 3 drops it: no file for German either.
        (EXIT_DATA, ["--lang", "de", "wo", "--out", str(tmp_path / "{lang}.tsv"), "--min-words", "4"], "no usable"),
    ]
    for code, argv, message in cases:
        got, _, err = run(capsys, *argv, *hermetic(root))
        assert got == code and message in err and len(err.strip().splitlines()) == 1, (argv, err)
        assert "Traceback" not in err
    assert sorted(path.name for path in tmp_path.iterdir()) == ["locale"] and catalog.read_bytes() == before
    assert run(capsys, "--list", "--no-system-catalogs")[0] == EXIT_USAGE
    assert main(["data", "gettext", "--lang", "../fr", "--out", str(out_file)]) == EXIT_USAGE
    assert "lang=['../fr'] (--lang): each must be a language folder name" in capsys.readouterr().err
    assert main(["data"]) == EXIT_USAGE


def test_unreadable_catalog_is_skipped_among_this_machines_and_refused_under_catalogs(capsys, caplog, root, tmp_path):
    broken = root / "fr" / "LC_MESSAGES" / "broken.mo"
    broken.write_bytes(b"\xde\x12\x04\x95" + bytes(8))  # the magic number, then cut short
    found = collect_gettext_pairs("fr", [root])
    assert len(found.skipped_catalogs) == 1 and found.skipped_catalogs[0].startswith(f"{broken}: not a readable")
    assert [record.getMessage() for record in caplog.records] == [f"skipping {found.skipped_catalogs[0]}"]
    assert found.pairs == gettext_pairs("fr", [root]) and len(found.pairs) == 20
    with pytest.raises(DataValidationError, match=r"broken\.mo: not a readable gettext catalog \(truncated"):
        collect_gettext_pairs("fr", [root], strict_roots=[root])
    code, _, err = run(capsys, "--lang", "fr", "--out", str(tmp_path / "pairs.tsv"), *hermetic(root))
    assert code == EXIT_DATA and "broken.mo" in err and not (tmp_path / "pairs.tsv").exists()


def test_report_counts_the_messages_left_out(capsys, root, tmp_path):
    write_catalog(root / "fr" / "LC_MESSAGES" / "nul.mo", [("Print the page", "Imprimer\0la page")])
    write_catalog(root / "fr" / "LC_MESSAGES" / "long.mo", [("Long " + "text " * 2000, "Long " + "texte " * 2000)])
    out_file = tmp_path / "pairs.tsv"
    code, out, _ = run(capsys, "--lang", "fr", "--out", str(out_file), *hermetic(root))
    assert code == EXIT_OK and "\0" not in out_file.read_text(encoding="utf-8")
    assert out.strip().splitlines()[-1] == (
        f"wrote 20 English-fr pairs from 6 catalogs to {out_file}; left out: 1 message(s) holding a NUL or an "
        "unpaired surrogate, 1 pair(s) longer than 10000 characters"
    )


def test_help_explains(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["data", "gettext", "--help"])
    out = capsys.readouterr().out
    assert exit_info.value.code == 0
    assert "--list" in out and "pairs.{lang}" in out and "English<TAB>xx" in out and "exit codes" in out


def _small_real_language() -> tuple[str, list[tuple[str, str]]] | None:
    """The installed language with the fewest catalog bytes that yields pairs (the first 20 tried), and its pairs."""
    roots = locale_roots()
    sizes = {
        lang: sum(path.stat().st_size for path in find_catalogs(lang, roots)) for lang in gettext_languages(roots)
    }
    for lang in sorted(sizes, key=lambda lang: (sizes[lang], lang))[:20]:
        pairs = gettext_pairs(lang)
        if pairs:
            return lang, pairs
    return None


def test_this_machines_catalogs(capsys, tmp_path):
    found = _small_real_language()
    if found is None:
        pytest.skip("no gettext catalogs with usable pairs installed on this machine")
    lang, expected = found
    out_file = tmp_path / "real.tsv"
    code, out, _ = run(capsys, "--lang", lang, "--out", str(out_file))
    assert code == EXIT_OK and out_file.read_text().splitlines() == [f"{en}\t{xx}" for en, xx in expected]
    code, out, _ = run(capsys, "--list", "--lang", lang, "--quiet")
    assert code == EXIT_OK and out.splitlines()[0].split()[:2] == [lang, str(len(expected))]
