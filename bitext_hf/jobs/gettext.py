"""The gettext data job: ``run_gettext(GettextConfig)`` lists the languages of the installed gettext catalogs with
their pair counts, or writes the English-xx pairs of some languages to files. ``bitext-hf data gettext`` calls it;
Python users call the same thing.

Every output is planned and checked before any catalog is read (:func:`bitext_hf.jobs.base.job_run`), every language
is read and checked before anything is written, and the files of every language are written to temporary files and
committed together, never over a catalog (refused by name and by content, whether read or not). The pairs are those of
:func:`bitext_hf.data.gettext_pairs` (and of the data spec ``fr=gettext``).
"""

from __future__ import annotations

import builtins
import os
import re
import reprlib
import sys
from dataclasses import dataclass, field
from pathlib import Path

from bitext_hf.data.catalog_reader import is_catalog_file
from bitext_hf.data.gettext import GettextPairs, collect_gettext_pairs, find_catalogs, gettext_languages, locale_roots
from bitext_hf.data.readers import DEFAULT_MAX_LINE_CHARS
from bitext_hf.errors import DataValidationError, UsageError
from bitext_hf.io.small_files import file_kind
from bitext_hf.io.tables import TABLE_FORMATS, output_format, write_table
from bitext_hf.io.terminal import escape_controls
from bitext_hf.jobs.base import ReportLine, job_run
from bitext_hf.jobs.option_fields import ValueType, check_fields, option, positive_int
from bitext_hf.jobs.options import QUIET

__all__ = [
    "GettextConfig",
    "GettextResult",
    "LanguageCount",
    "WrittenPairs",
    "check_language_folder",
    "gettext_report",
    "run_gettext",
]

# A language folder name: fr, pt_BR, sr@latin, zh_Hans, ca@valencia; never a path.
_LANGUAGE_FOLDER = re.compile(r"[A-Za-z]{2,3}(?:[_@.-][A-Za-z0-9]+)*")


def check_language_folder(text: str) -> str:
    """``text`` if it names a language folder (``fr``, ``pt_BR``, ``sr@latin``), never a path; else ``UsageError``."""
    if not _LANGUAGE_FOLDER.fullmatch(text):
        raise UsageError(f"{text!r} is not a language folder name such as fr, pt_BR or sr@latin")
    return text


# The value type of --lang: each item a language folder's name (what check_language_folder accepts).
_LANGUAGE_FOLDER_TYPE = ValueType(
    "language code",
    str,
    "a language folder name such as fr, pt_BR or sr@latin (never a path)",
    lambda text: _LANGUAGE_FOLDER.fullmatch(text) is not None,
)


@dataclass
class GettextConfig:
    """One ``bitext-hf data gettext`` run; the fields are its options (``--max-pairs`` is ``max_pairs``), and
    messages name them as the command line spells them. Checked when made (``UsageError``).

    Args:
        list (bool): report the languages found with their pair counts instead of writing pairs.
        out (str, optional): the pairs file (.tsv, .csv, .jsonl, .parquet; ``-`` for stdout); with several
            languages it holds ``{lang}``.
        lang (list of str, optional): the language folders to write (or, with ``list``, to count only).
        format (str, optional): "tsv", "csv", "jsonl" or "parquet", whatever the name of ``out``.
        catalogs (list of str): more folders of ``<lang>/LC_MESSAGES/*.mo|*.po`` catalogs; a catalog there that
            cannot be read is an error, not skipped.
        no_system_catalogs (bool): search only ``catalogs`` (a reproducible set).
        max_pairs (int, optional): keep the first pairs of each language (catalog order).
        min_words (int, defaults to 1): drop pairs whose English has fewer words.
        quiet (bool): no progress line or bar on stderr.
    """

    list: bool = field(
        default=False, metadata=option("print the languages found with their pair counts", exclusive="what")
    )
    # The field ``list`` hides the builtin in this class body, so the fields below name ``builtins.list``.
    out: str | None = field(
        default=None,
        metadata=option(
            "write the pairs here (.tsv, .csv, .jsonl, .parquet; - for stdout); with several --lang it must "
            "hold {lang}, e.g. pairs.{lang}.tsv. Written atomically, never over a catalog",
            metavar="FILE",
            exclusive="what",
        ),
    )
    lang: builtins.list[str] | None = field(
        default=None,
        metadata=option(
            "language folder(s): fr, pt_BR, sr@latin (English is the msgid side); with --list, list only these",
            metavar="LANG",
            nargs="+",
            type=_LANGUAGE_FOLDER_TYPE,
        ),
    )
    format: str | None = field(
        default=None, metadata=option("output format, whatever the name", choices=TABLE_FORMATS)
    )
    catalogs: builtins.list[str] = field(
        default_factory=builtins.list,
        metadata=option(
            "also search this folder of <lang>/LC_MESSAGES/*.mo|*.po catalogs (repeatable); a catalog here "
            "that cannot be read is an error (exit 3), not skipped",
            metavar="DIR",
            action="append",
        ),
    )
    no_system_catalogs: bool = field(
        default=False,
        metadata=option(
            "search only the --catalogs folders (a reproducible set instead of what this machine has installed)"
        ),
    )
    max_pairs: int | None = field(
        default=None,
        metadata=option("keep the first N pairs of each language (catalog order)", metavar="N", type=positive_int),
    )
    min_words: int = field(
        default=1,
        metadata=option(
            "drop pairs whose English has fewer words (placeholders such as %%s not counted; default 1)",
            metavar="N",
            type=positive_int,
        ),
    )
    quiet: bool = field(default=False, metadata=QUIET)

    def __post_init__(self) -> None:
        # Each field's type and range (lang language folders, never paths; catalogs a list, paths as str...).
        check_fields(self)
        if self.list:
            if self.out is not None:
                raise UsageError(f"--out {self.out}: not allowed with --list, which prints to stdout")
            if self.format:
                raise UsageError("--format goes with --out; --list prints to stdout")
        else:
            if not self.lang or not self.out:
                raise UsageError("give --lang LANG and --out FILE (or --list to see the languages)")
            if len(self.languages) > 1 and "{lang}" not in self.out:
                raise UsageError(
                    f"--out {self.out}: with several languages, put {{lang}} in the name (pairs.{{lang}}.tsv)"
                )
        if self.no_system_catalogs and not self.catalogs:
            raise UsageError("--no-system-catalogs needs at least one --catalogs DIR")

    @property
    def languages(self) -> builtins.list[str]:
        """``lang`` without repeats, in the order given."""
        return list(dict.fromkeys(self.lang or []))


@dataclass
class LanguageCount:
    """A language folder with the pairs its ``catalogs`` catalogs give."""

    lang: str
    pairs: int
    catalogs: int


@dataclass
class WrittenPairs:
    """``pairs`` English-``lang`` pairs written to ``path`` as ``format``."""

    lang: str
    path: str
    pairs: int
    format: str


@dataclass
class GettextResult:
    """What a run read and wrote.

    Args:
        languages (list of LanguageCount): every language read; with ``list``, most pairs first.
        listed (list of LanguageCount): what ``--list`` shows: the languages with pairs, or every language asked for.
        written (list of WrittenPairs): the files written, in the order of ``lang`` (none with ``list``).
        unreadable_catalogs (int), unusable_entries (int), too_long (int): what the pairs leave out: catalogs
            skipped with a warning, messages holding a NUL or an unpaired surrogate, pairs longer than a line the
            readers accept.
    """

    languages: list[LanguageCount]
    listed: list[LanguageCount] = field(default_factory=list)
    written: list[WrittenPairs] = field(default_factory=list)
    unreadable_catalogs: int = 0
    unusable_entries: int = 0
    too_long: int = 0

    @property
    def left_out(self) -> list[str]:
        """What the pairs miss and why, one phrase per kind (empty when nothing was left out)."""
        counts = (
            (self.unreadable_catalogs, "unreadable catalog(s), see the warnings"),
            (self.unusable_entries, "message(s) holding a NUL or an unpaired surrogate"),
            (self.too_long, f"pair(s) longer than {DEFAULT_MAX_LINE_CHARS} characters"),
        )
        return [f"{count} {what}" for count, what in counts if count]


def gettext_report(config: GettextConfig, result: GettextResult) -> list[ReportLine]:
    """What ``bitext-hf data gettext`` prints when it ends: with ``list``, a line per language (most pairs first)
    and the totals; else each file written (for several languages) and the totals, with what was left out."""
    left_out = f"; left out: {', '.join(result.left_out)}" if result.left_out else ""
    catalogs = sum(row.catalogs for row in result.languages)
    if config.list:
        width = max((len(row.lang) for row in result.listed), default=0)
        lines = [
            ReportLine(f"{row.lang:<{width}}  {row.pairs:>7} pairs  {row.catalogs:>5} catalogs", "stdout")
            for row in result.listed
        ]
        with_pairs = [row for row in result.languages if row.pairs]
        empty = len(result.languages) - len(with_pairs)
        totals = (
            f"{len(with_pairs)} language(s) with pairs, {sum(row.pairs for row in result.languages)} pairs in all, "
            f"from {catalogs} catalogs" + (f"; {empty} language(s) without a usable pair" if empty else "") + left_out
        )
        return [*lines, ReportLine(totals, "stdout")]
    lines = []
    if len(result.written) > 1:
        lines = [
            ReportLine(f"wrote {written.pairs} English-{written.lang} pairs to {written.path}")
            for written in result.written
        ]
    where = "stdout" if config.out == "-" else (result.written[0].path if len(result.written) == 1 else config.out)
    totals = (
        f"wrote {sum(written.pairs for written in result.written)} English-"
        f"{'/'.join(written.lang for written in result.written)} pairs from {catalogs} catalogs to {where}"
        + (f" (at most {config.max_pairs} per language)" if config.max_pairs else "")
        + left_out
    )
    return [*lines, ReportLine(totals)]


def run_gettext(config: GettextConfig) -> GettextResult:
    """Run ``config``: list the languages with their pair counts, or check every output, read every language, then
    write each language's pairs and commit the files together (all or none).

    Raises:
        UsageError: an output that is a catalog or cannot be written; a ``config`` that is no
            :class:`GettextConfig`, or a field set since it was made to a value it refuses (checked again first).
        DataValidationError: a ``--catalogs`` folder that does not exist or is no folder, a language without
            catalogs or usable pairs, a catalog under a ``--catalogs`` folder that cannot be read.
    """
    if not isinstance(config, GettextConfig):
        raise UsageError(f"run_gettext takes a GettextConfig, not {type(config).__name__} ({reprlib.repr(config)})")
    config.__post_init__()  # again: a field set since the config was made (lang="fr") is refused as when made
    roots = _roots(config)
    return _list(config, roots) if config.list else _write(config, roots)


def _roots(config: GettextConfig) -> list[Path]:
    for folder in config.catalogs:
        if not Path(folder).is_dir():
            try:
                what = f"not a folder ({file_kind(os.stat(folder).st_mode)})"  # a link followed, as it would be
            except OSError:
                what = "no such folder"
            raise DataValidationError(f"--catalogs {escape_controls(folder)}: {what}")
    return locale_roots(config.catalogs, system=not config.no_system_catalogs)


def _pairs(lang: str, catalogs: list[Path], config: GettextConfig) -> GettextPairs:
    """``lang``'s pairs from its ``catalogs`` (listed once, by :func:`find_catalogs`: the ones read are the ones
    protected): a catalog under a --catalogs folder that cannot be read is the user's bad data (exit 3), one of this
    machine's is skipped with a warning."""
    found = collect_gettext_pairs(lang, catalogs=catalogs, min_words=config.min_words, strict_roots=config.catalogs)
    if config.max_pairs is not None:
        found.pairs = found.pairs[: config.max_pairs]
    return found


def _result(languages: list[LanguageCount], read: list[GettextPairs]) -> GettextResult:
    return GettextResult(
        languages,
        unreadable_catalogs=sum(len(item.skipped_catalogs) for item in read),
        unusable_entries=sum(item.unusable_entries for item in read),
        too_long=sum(item.too_long for item in read),
    )


def _list(config: GettextConfig, roots: list[Path]) -> GettextResult:
    languages = config.languages or gettext_languages(roots)
    if not languages:
        raise DataValidationError(
            f"no gettext catalogs under {len(roots)} folder(s) (<root>/<lang>/LC_MESSAGES/*.mo); install translated "
            "packages or add a folder with --catalogs DIR"
        )
    if not config.quiet:
        print(f"reading the catalogs of {len(languages)} language(s)...", file=sys.stderr)
    from tqdm.auto import tqdm

    rows, read = [], []
    # A bar on stderr while the catalogs are read (up to a minute for every language of a desktop system), as every
    # other wait of the package shows one: also where stderr is a pipe or a log, so that the wait is never one
    # silent line; quiet turns it off.
    progress = tqdm(languages, desc="catalogs", unit="language", disable=config.quiet)
    for lang in progress:
        catalogs = find_catalogs(lang, roots)
        found = _pairs(lang, catalogs, config) if catalogs else None
        if found is not None:
            read.append(found)
        rows.append(LanguageCount(lang, len(found.pairs) if found else 0, len(catalogs)))
    rows.sort(key=lambda row: (-row.pairs, row.lang))
    result = _result(rows, read)
    result.listed = [row for row in rows if row.pairs or config.lang]
    return result


def _write(config: GettextConfig, roots: list[Path]) -> GettextResult:
    languages = config.languages
    # Cheap checks first: every language has catalogs and every output path can be written, before any reading.
    catalogs = {lang: find_catalogs(lang, roots) for lang in languages}
    missing = [lang for lang, found in catalogs.items() if not found]
    if missing:
        raise DataValidationError(
            f"no gettext catalogs for {', '.join(missing)} under {len(roots)} folder(s) "
            "(<root>/<lang>/LC_MESSAGES/*.mo); `bitext-hf data gettext --list` shows the languages found"
        )
    every_catalog = [path for found in catalogs.values() for path in found]
    with job_run(config, inputs=every_catalog) as outputs:
        paths = {lang: config.out.replace("{lang}", lang) for lang in languages}
        formats = {}
        for lang, out in paths.items():
            outputs.add_out(out)
            _refuse_catalog_output(out)
            formats[lang] = output_format(out, config.format)
        found = {lang: _pairs(lang, catalogs[lang], config) for lang in languages}
        result = _read(config, languages, catalogs, found)
        for lang in languages:
            pairs = found[lang].pairs
            # Cleaned messages are one line without tabs: TSV (no header, two plain columns) holds every pair.
            columns = {"en": [en for en, _ in pairs], lang: [xx for _, xx in pairs]}
            with outputs.staged(paths[lang]) as path:
                write_table(path, formats[lang], columns, tsv_header=False)
            result.written.append(WrittenPairs(lang, paths[lang], len(pairs), formats[lang]))
        outputs.commit()  # every language's file together, or none
    return result


def _read(
    config: GettextConfig, languages: list[str], catalogs: dict[str, list[Path]], found: dict[str, GettextPairs]
) -> GettextResult:
    """The result of reading every language (``found``); ``DataValidationError`` when one has no usable pair."""
    empty = [lang for lang, item in found.items() if not item.pairs]
    if empty:
        raise DataValidationError(
            f"no usable pair in the {sum(len(catalogs[lang]) for lang in empty)} catalog(s) of {', '.join(empty)} "
            "(untranslated, without letters, or below --min-words); nothing was written"
        )
    counts = [LanguageCount(lang, len(found[lang].pairs), len(catalogs[lang])) for lang in languages]
    return _result(counts, list(found.values()))


def _refuse_catalog_output(out: str) -> None:
    """``UsageError`` for an output named like a catalog or holding one (any catalog: the ones read are refused as
    inputs too), so the pairs never replace a catalog, nor appear where catalogs are searched for."""
    if out != "-" and is_catalog_file(out):
        raise UsageError(
            f"--out {out}: is a gettext catalog (.mo / .po, by its name or its content); data gettext never writes "
            "over a catalog: give a .tsv, .csv, .jsonl or .parquet path"
        )
