"""Hostile catalogs and outputs for ``bitext-hf data gettext``, one table.

Every case builds a catalog tree in a fresh folder (``locale/<lang>/LC_MESSAGES``, searched with ``--catalogs``, or
``system/``, standing in for this machine's locale folders), runs one command and asserts the promises of
tests/test_hostile.py: the documented exit code, one stderr line without a traceback (on failure), every file that
was there before byte-identical, no output but the expected ones (no temp file either), no hang, nothing executed.
The rule for a catalog that cannot be read: under a ``--catalogs`` folder it is the user's data, exit 3 naming it;
among this machine's catalogs it is skipped with one warning naming it. What a success writes reads back into
``score``. The job from Python too (``run_gettext``): paths of another type, values of the wrong type or absurd,
``--catalogs`` folders that are files, FIFOs or devices, a config that is none, a field changed after the config was
made: refused with the package's own errors before any catalog is read. Then several languages at once: their files
planned before any catalog is read and committed together, all or none.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from cli_fakes import install_fake_encoders, run
from gettext_catalogs import MO_COUNT, MO_ORIGINALS, MO_TRANSLATIONS, mo_bytes, po_text, with_field
from hostile_jobs import python_call
from hostile_support import left_as_before, refusal_line, snapshot

from bitext_hf.cli import EXIT_DATA, EXIT_ERROR, EXIT_OK, EXIT_USAGE, main
from bitext_hf.data import read_tsv_pairs
from bitext_hf.data.catalog_reader import MAX_CATALOG_BYTES, MAX_CATALOG_ENTRIES

pytestmark = pytest.mark.timeout(60)  # a catalog that blocks (a FIFO) or loops (a count of 2**31) fails, not hangs

GOOD = [("Open the file", "Ouvrir le fichier"), ("Close the window", "Fermer la fenêtre")]
SYSTEM_LANGUAGE = "zz"  # no real catalog folder has it: the system cases see only their own catalogs


def _messages(root: Path, lang: str = "fr") -> Path:
    folder = root / lang / "LC_MESSAGES"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _locale(tmp: Path) -> Path:
    """``locale/fr`` with one good catalog, ``locale/de`` with one that no French command reads."""
    root = tmp / "locale"
    (_messages(root) / "good.mo").write_bytes(mo_bytes(GOOD))
    (_messages(root, "de") / "app.mo").write_bytes(mo_bytes([("Open the file", "Die Datei öffnen")]))
    return root


def _gettext(tmp: Path, *extra: str) -> list[str]:
    return ["data", "gettext", "--lang", "fr", "--no-system-catalogs", "--catalogs", str(tmp / "locale"), *extra]


def _write(path: Path, content: bytes | str) -> None:
    path.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8"))


def _catalog(name: str, content: bytes | str | Callable[[Path], None], *, system: bool = False):
    """A setup: the good catalogs and ``name`` beside them (its bytes, or made by a function of its path), under
    ``--catalogs`` or, with ``system``, among this machine's catalogs; the pairs go to pairs.tsv."""

    def setup(tmp: Path) -> list[str]:
        if system:
            folder = _messages(tmp / "system", SYSTEM_LANGUAGE)
            (folder / "good.mo").write_bytes(mo_bytes(GOOD))
            argv = ["data", "gettext", "--lang", SYSTEM_LANGUAGE, "--out", str(tmp / "pairs.tsv")]
        else:
            folder = _messages(_locale(tmp))
            argv = _gettext(tmp, "--out", str(tmp / "pairs.tsv"))
        if callable(content):
            content(folder / name)
        else:
            _write(folder / name, content)
        return argv

    return setup


def _output(make: Callable[[Path], str], *extra: str):
    """A setup: the good catalogs, and the output path ``make`` returns (after making whatever is there)."""

    def setup(tmp: Path) -> list[str]:
        _locale(tmp)
        return _gettext(tmp, "--out", make(tmp), *extra)

    return setup


def _symlink_out(target: str) -> Callable[[Path], str]:
    def make(tmp: Path) -> str:
        os.symlink(tmp / "locale" / target, tmp / "pairs.tsv")
        return str(tmp / "pairs.tsv")

    return make


def _po_holding_out(tmp: Path) -> str:
    _write(tmp / "pairs.tsv", po_text(GOOD))  # someone's catalog under a pairs name
    return str(tmp / "pairs.tsv")


def _several_languages_into_catalogs(tmp: Path) -> list[str]:
    _locale(tmp)
    argv = _gettext(tmp, "--out", str(tmp / "{lang}.mo"), "--format", "tsv")
    return [*argv[:4], "de", *argv[4:]]


def _list_with_broken_catalog(tmp: Path) -> list[str]:
    _write(_messages(_locale(tmp)) / "bad.mo", mo_bytes(GOOD)[:40])
    return ["data", "gettext", "--list", "--no-system-catalogs", "--catalogs", str(tmp / "locale")]


SAVE = ("Save the file", "Enregistrer le fichier")
_MO = mo_bytes([SAVE])
# polib's tables follow the 28-byte header: originals at 28, translations right after them.
_MO_TRANSLATION_TABLE = 28 + 8 * 2
UNTERMINATED_PO = po_text([]) + '\nmsgid "Save the file"\nmsgstr "Enregistrer le\n\nmsgid "Quit"\nmsgstr "Quitter"\n'
TOO_MANY_PO = "".join(f'msgid "m{i}"\nmsgstr "n{i}"\n' for i in range(MAX_CATALOG_ENTRIES + 1))


def _fifo(path: Path) -> None:
    os.mkfifo(path)


def _folder(path: Path) -> None:
    path.mkdir()


def _dev_zero(path: Path) -> None:
    os.symlink("/dev/zero", path)


def _sparse_huge_mo(path: Path) -> None:
    with open(path, "wb") as handle:
        handle.write(_MO)
        handle.truncate(MAX_CATALOG_BYTES + 1)  # sparse: no disk space, but a size no catalog may have


def _python(*, change: dict | None = None, config: Callable[[], object] | None = None, **fields):
    """A setup: the good catalogs, and ``run_gettext`` from Python on the config of ``fields`` (French from
    ``--catalogs locale`` alone into pairs.tsv unless given), with ``change`` set on it after it was made; or on
    ``config()`` itself, whatever it is."""

    def setup(tmp: Path):
        from bitext_hf.jobs.gettext import GettextConfig, run_gettext

        _locale(tmp)
        (tmp / "notes.txt").write_text("not a folder of catalogs\n", encoding="utf-8")
        os.mkfifo(tmp / "fifo")
        os.symlink("locale", tmp / "alias")

        def call():
            values = {"lang": ["fr"], "out": str(tmp / "pairs.tsv"), "catalogs": [str(tmp / "locale")]}
            made = GettextConfig(**{**values, "no_system_catalogs": True, "quiet": True, **fields})
            for name, value in (change or {}).items():
                setattr(made, name, value)
            return run_gettext(made if config is None else config())

        return call

    return setup


@dataclass
class Case:
    """One hostile situation: ``setup`` builds it in a folder and returns the command line, or a Python call (its
    exception the refusal)."""

    setup: Callable[[Path], list[str] | Callable[[], object]]
    code: int
    message: str = ""  # part of the one stderr line (failures), or of the one warning (successes)
    pairs: int | None = None  # a success's pairs in pairs.tsv, which must read back into `score`
    system: bool = False  # the catalogs are this machine's: DEFAULT_LOCALE_ROOTS points at the case's system/
    keeps: tuple[str, str] = GOOD[0]  # a pair a success must write, exactly


CASES: dict[str, Case] = {
    # --out: never over a catalog, read or not, by name or by content.
    "out is another language's catalog": Case(
        _output(lambda tmp: str(tmp / "locale" / "de" / "LC_MESSAGES" / "app.mo"), "--format", "tsv"),
        EXIT_USAGE,
        "is a gettext catalog",
    ),
    "out is a new name ending in .po": Case(
        _output(lambda tmp: str(tmp / "pairs.po"), "--format", "tsv"), EXIT_USAGE, "is a gettext catalog"
    ),
    "out links to an input catalog": Case(_output(_symlink_out("fr/LC_MESSAGES/good.mo")), EXIT_USAGE, "is the input"),
    "out links to a catalog not read": Case(
        _output(_symlink_out("de/LC_MESSAGES/app.mo")), EXIT_USAGE, "is a gettext catalog"
    ),
    "out holds a .po under another name": Case(_output(_po_holding_out), EXIT_USAGE, "is a gettext catalog"),
    "out pattern names catalogs": Case(_several_languages_into_catalogs, EXIT_USAGE, "is a gettext catalog"),
    # Messages no file of pairs can hold are left out and counted; the rest reads back (section 2).
    "NUL in a .mo msgstr": Case(
        _catalog("bad.mo", mo_bytes([("Save the file", "Enregistrer\0le fichier")])), 0, pairs=2
    ),
    "NUL in a .po msgid": Case(
        _catalog("bad.po", po_text([("Save\0the file", "Enregistrer le fichier")])), 0, pairs=2
    ),
    "NUL in a .po msgstr": Case(_catalog("bad.po", po_text([("Save the file", "Enregistrer\0")])), 0, pairs=2),
    "tabs, newlines and CRs in messages": Case(
        _catalog("odd.mo", mo_bytes([("Save\tthe\r\nfile\r", "Enregistrer\tle\nfichier\r\x0b\x1c")])),
        0,
        pairs=3,
        keeps=SAVE,
    ),
    "a line separator inside a .po string": Case(
        _catalog("odd.po", po_text([("Save the file", "Enregistrer\u2028le\x85fichier")])), 0, pairs=3, keeps=SAVE
    ),
    "a pair longer than a line may be": Case(
        _catalog("long.mo", mo_bytes([("Save " + "very " * 1100, "Enregistrer " + "très " * 1100)])), 0, pairs=2
    ),
    # A catalog under --catalogs that cannot be read: exit 3 naming it, nothing written (sections 2 and 4).
    "unterminated .po string": Case(_catalog("bad.po", UNTERMINATED_PO), EXIT_DATA, "bad.po:5: not a readable"),
    "truncated .mo": Case(
        _catalog("bad.mo", _MO[:40]), EXIT_DATA, "bad.mo: not a readable gettext catalog (truncated"
    ),
    ".mo table offset past the end": Case(
        _catalog("bad.mo", with_field(_MO, MO_ORIGINALS, 10**6)), EXIT_DATA, "lies outside the file"
    ),
    ".mo string past the end": Case(
        _catalog("bad.mo", with_field(_MO, _MO_TRANSLATION_TABLE + 8, 500)), EXIT_DATA, "runs past"
    ),
    ".mo count of 2**31": Case(_catalog("bad.mo", with_field(_MO, MO_COUNT, 2**31)), EXIT_DATA, "2147483648 entries"),
    ".mo tables overlapping": Case(
        _catalog("bad.mo", with_field(_MO, MO_TRANSLATIONS, 36)), EXIT_DATA, "tables overlap"
    ),
    ".mo in an unknown charset": Case(
        _catalog("bad.mo", mo_bytes([SAVE], charset="x-no-such-charset")), EXIT_DATA, "charset 'x-no-such-charset'"
    ),
    ".mo in a codec that is not text": Case(
        _catalog("bad.mo", mo_bytes([SAVE], charset="zlib")), EXIT_DATA, "not a text encoding"
    ),
    ".po in an unknown charset": Case(
        _catalog("bad.po", po_text([SAVE], charset="x-no-such-charset")), EXIT_DATA, "charset 'x-no-such-charset'"
    ),
    ".mo with a wrong magic number": Case(_catalog("bad.mo", b"\x00\x01garbage" * 8), EXIT_DATA, "wrong magic number"),
    ".po that is a FIFO": Case(_catalog("bad.po", _fifo), EXIT_DATA, "bad.po: not a readable gettext catalog (not a"),
    ".po that is a folder": Case(_catalog("bad.po", _folder), EXIT_DATA, "it is a folder"),
    ".mo that links to /dev/zero": Case(_catalog("bad.mo", _dev_zero), EXIT_DATA, "not a regular file"),
    ".mo over the size bound": Case(_catalog("bad.mo", _sparse_huge_mo), EXIT_DATA, "more than the 64 MiB"),
    ".po over the entry bound": Case(_catalog("bad.po", TOO_MANY_PO), EXIT_DATA, f"{MAX_CATALOG_ENTRIES + 1} entries"),
    "--list with a truncated catalog": Case(_list_with_broken_catalog, EXIT_DATA, "bad.mo: not a readable"),
    # One of this machine's catalogs that cannot be read: one warning naming it, the others' pairs written.
    "system: truncated .mo": Case(_catalog("bad.mo", _MO[:40], system=True), 0, "bad.mo", pairs=2, system=True),
    "system: .po that is a FIFO": Case(_catalog("bad.po", _fifo, system=True), 0, "bad.po", pairs=2, system=True),
    "system: unterminated .po": Case(
        _catalog("bad.po", UNTERMINATED_PO, system=True), 0, "bad.po:5", pairs=2, system=True
    ),
    # The job from Python: paths of another type work; a value of the wrong type, absurd, or set after the config was
    # made, a config that is none: the package's own error, no catalog read, nothing written.
    "from Python: paths as pathlib.Path": Case(_python(out=Path("pairs.tsv"), catalogs=[Path("locale")]), 0, pairs=2),
    "from Python: --catalogs a link to the folder": Case(_python(catalogs=["alias"]), 0, pairs=2),
    "from Python: max_pairs 10**30": Case(_python(max_pairs=10**30), 0, pairs=2),
    "from Python: lang one string": Case(
        _python(lang="fr"), EXIT_USAGE, "lang='fr' (--lang): give a list, lang=['fr'], not one string"
    ),
    "from Python: lang a path": Case(_python(lang=["../fr"]), EXIT_USAGE, "each must be a language folder name"),
    "from Python: lang an empty list": Case(_python(lang=[]), EXIT_USAGE, "lang=[] (--lang): give at least one"),
    "from Python: catalogs one string": Case(_python(catalogs="locale"), EXIT_USAGE, "(--catalogs): give a list"),
    "from Python: catalogs None": Case(
        _python(catalogs=None), EXIT_USAGE, "catalogs=None (--catalogs): must be a list of strings"
    ),
    "from Python: catalogs missing": Case(_python(catalogs=["nope"]), EXIT_DATA, "--catalogs nope: no such folder"),
    "from Python: catalogs a file": Case(
        _python(catalogs=["notes.txt"]), EXIT_DATA, "--catalogs notes.txt: not a folder (a regular file)"
    ),
    "from Python: catalogs a FIFO": Case(
        _python(catalogs=["fifo"]), EXIT_DATA, "--catalogs fifo: not a folder (a FIFO)"
    ),
    "from Python: catalogs /dev/null": Case(
        _python(catalogs=[os.devnull]), EXIT_DATA, "--catalogs /dev/null: not a folder (a character device)"
    ),
    "from Python: max_pairs 0": Case(
        _python(max_pairs=0), EXIT_USAGE, "max_pairs=0 (--max-pairs): must be an integer"
    ),
    "from Python: max_pairs NaN": Case(_python(max_pairs=float("nan")), EXIT_USAGE, "max_pairs=nan (--max-pairs)"),
    "from Python: min_words a string": Case(_python(min_words="1"), EXIT_USAGE, "min_words='1' (--min-words)"),
    "from Python: out a number": Case(_python(out=7), EXIT_USAGE, "out=7 (--out): must be a string"),
    "from Python: out a folder": Case(_python(out="locale"), EXIT_USAGE, "--out locale: is a directory"),
    "from Python: list a string": Case(_python(list="yes"), EXIT_USAGE, "list='yes' (--list): must be True or False"),
    "from Python: format xls": Case(_python(format="xls"), EXIT_USAGE, "format='xls' (--format): must be one of"),
    "from Python: None for the config": Case(
        _python(config=lambda: None), EXIT_USAGE, "run_gettext takes a GettextConfig, not NoneType"
    ),
    "from Python: a dict for the config": Case(
        _python(config=lambda: {"lang": ["fr"]}), EXIT_USAGE, "run_gettext takes a GettextConfig, not dict"
    ),
    "from Python: lang set to a string after": Case(
        _python(change={"lang": "fr"}), EXIT_USAGE, "lang='fr' (--lang): give a list"
    ),
    "from Python: max_pairs set to -1 after": Case(
        _python(change={"max_pairs": -1}), EXIT_USAGE, "max_pairs=-1 (--max-pairs): must be an integer >= 1"
    ),
    "from Python: out set to None after": Case(
        _python(change={"out": None}), EXIT_USAGE, "give --lang LANG and --out FILE"
    ),
}


@pytest.mark.parametrize("name", CASES)
def test_hostile_gettext_case(name, capsys, caplog, tmp_path, monkeypatch):
    case = CASES[name]
    install_fake_encoders(monkeypatch)  # the read-back `score` of a success
    if case.system:
        monkeypatch.setattr("bitext_hf.data.gettext.DEFAULT_LOCALE_ROOTS", (str(tmp_path / "system"),))
    argv = case.setup(tmp_path)
    capsys.readouterr()
    before = snapshot(tmp_path)
    if callable(argv):
        monkeypatch.chdir(tmp_path)  # the relative paths of a Python call
        code, err = python_call(argv)
    else:
        code, _, err = run(capsys, *argv)

    assert code == case.code, err
    assert "Traceback" not in err
    if case.code != EXIT_OK:
        line = refusal_line(err)
        assert ": error: " in line and case.message in line, line
    left_as_before(tmp_path, before, ("pairs.tsv",) if case.code == EXIT_OK else ())
    if case.code == EXIT_OK:
        # pytest's handler takes the log records that the command line prints as one stderr line each.
        warnings = [record.getMessage() for record in caplog.records if record.levelname == "WARNING"]
        assert len(warnings) == (1 if case.message else 0) and case.message in "".join(warnings), warnings
        sources, targets = read_tsv_pairs(tmp_path / "pairs.tsv")
        assert len(sources) == case.pairs and not any("\0" in text for text in sources + targets)
        assert case.keeps in zip(sources, targets)
        scored = tmp_path / "scored.tsv"
        assert main(["score", "--pairs", str(tmp_path / "pairs.tsv"), "--out", str(scored), "--k", "1", "-q"]) == 0
        assert len(scored.read_text(encoding="utf-8").splitlines()) >= case.pairs


# --- several languages: every file planned before any catalog is read, all of them committed together


def _two_languages(tmp: Path, out: str = "pairs.{lang}.tsv") -> list[str]:
    _locale(tmp)
    return [*_gettext(tmp, "--out", out)[:4], "de", *_gettext(tmp, "--out", out)[4:]]


def _earlier_files(tmp: Path) -> None:
    for lang in ("fr", "de"):
        (tmp / f"pairs.{lang}.tsv").write_text(f"an earlier run's {lang} pairs\n", encoding="utf-8")


def _fail_second_rename(monkeypatch) -> None:
    real, renamed = os.replace, []

    def replace(source, target, *args, **kwargs):
        if os.path.basename(str(target)).startswith("pairs.") and ".bitext-hf-" in os.path.basename(str(source)):
            renamed.append(target)
            if len(renamed) == 2:
                raise OSError(5, "Input/output error")
        return real(source, target, *args, **kwargs)

    monkeypatch.setattr(os, "replace", replace)


def _socket(path: Path) -> None:
    import socket

    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    server.close()


@pytest.mark.parametrize(
    ("what", "code", "message"),
    [
        ("the second language's rename fails", EXIT_ERROR, "pairs.de.tsv: input/output error"),
        ("a link at the second language's name", EXIT_OK, ""),
        ("a socket at the second language's name", EXIT_USAGE, "--out pairs.de.tsv: is a socket"),
        ("a folder at the second language's name", EXIT_USAGE, "--out pairs.de.tsv: is a directory"),
        ("the second language's name is a catalog", EXIT_USAGE, "is a gettext catalog"),
    ],
)
def test_several_languages_are_written_together_or_not_at_all(what, code, message, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    argv = _two_languages(tmp_path)
    _earlier_files(tmp_path)
    replaced = set()
    if "link" in what:
        (tmp_path / "victim.tsv").write_text("someone's file\n", encoding="utf-8")
        (tmp_path / "pairs.de.tsv").unlink()
        os.symlink("victim.tsv", tmp_path / "pairs.de.tsv")  # the user's own link: followed, as every --out
        replaced = {"pairs.fr.tsv", "victim.tsv"}
    elif "socket" in what:
        (tmp_path / "pairs.de.tsv").unlink()
        _socket(tmp_path / "pairs.de.tsv")
    elif "folder" in what:
        (tmp_path / "pairs.de.tsv").unlink()
        (tmp_path / "pairs.de.tsv").mkdir()
    elif "catalog" in what:
        (tmp_path / "pairs.de.tsv").write_text(po_text(GOOD), encoding="utf-8")
    before = snapshot(tmp_path)
    if "rename" in what:
        _fail_second_rename(monkeypatch)
    code_run, _, err = run(capsys, *argv)
    monkeypatch.undo()
    assert code_run == code, err
    if code != EXIT_OK:
        assert message in refusal_line(err)
    after = snapshot(tmp_path)
    assert {path: entry for path, entry in after.items() if path not in replaced} == {
        path: entry for path, entry in before.items() if path not in replaced
    }
    for path in replaced:
        assert after[path] != before[path] and after[path][0] == "file"
    if replaced:
        assert os.path.islink(tmp_path / "pairs.de.tsv")
        assert read_tsv_pairs(tmp_path / "victim.tsv")[1] == ["Die Datei öffnen"]
