"""``bitext-hf data gettext``: training and test pairs from the gettext catalogs installed on this machine.

``--lang fr --out pairs.tsv`` writes what ``bitext_hf.data.gettext_pairs("fr")`` returns (and what the data spec
``fr=gettext`` loads): English<TAB>French lines, each English message and each translation once, the format that
``fr=pairs.tsv`` specs read. ``--list`` prints the languages found with their pair counts. Every language is read
and checked before anything is written, and every file is written atomically, never over a catalog (refused by name and by content, whether read or not).
"""

from __future__ import annotations

import argparse
import re
import sys
from typing import TYPE_CHECKING

from bitext_hf.errors import EXIT_OK, EXIT_USAGE, DataValidationError, UsageError

if TYPE_CHECKING:
    from bitext_hf.data.gettext import GettextPairs

__all__ = ["EPILOG_GETTEXT", "add_data", "cmd_data_gettext"]

EPILOG_GETTEXT = """examples:
  bitext-hf data gettext --list                              # languages found, most pairs first
  bitext-hf data gettext --list --lang wo ff                 # the counts of these languages only
  bitext-hf data gettext --lang fr --out pairs.fr.tsv        # English<TAB>French, as `fr=pairs.fr.tsv` reads it
  bitext-hf data gettext --lang de fr --out 'pairs.{lang}.jsonl' --max-pairs 5000
  bitext-hf data gettext --lang wo --catalogs ./my-locale --out - | head

Catalogs are <root>/<lang>/LC_MESSAGES/*.mo and *.po under the system locale folders (/usr/share/locale,
/usr/share/locale-langpack, /usr/local/share/locale), the locale folders of installed Python packages, and every
--catalogs DIR. Messages are made one-line and accelerator-free; pairs without letters or left untranslated are
dropped, and each English message and each translation is kept once (the first catalog in path order wins), so
the pairs are a 1:1 alignment usable as test data. The same pairs as bitext_hf.data.gettext_pairs(lang) and the
data spec `lang=gettext`.

A catalog that cannot be read (not a regular file, over 64 MiB or 200000 entries, truncated or inconsistent, an
unknown charset, a string left open) is skipped with a warning naming it when it is one of this machine's, and is
an error (exit 3) when it lies under a --catalogs folder. Messages holding a NUL character and pairs longer than a
line the readers accept (10000 characters) are left out and counted in the report, so the output always reads back
into `score` and `mine`. --out is never a catalog, by name (.mo, .po) or by content (exit 2).

Output: .tsv (English<TAB>xx, no header), .csv and .parquet (columns en and xx), .jsonl ({"en": ..., "xx": ...});
the format follows the extension, or --format; `-` is stdout (TSV unless --format).
"""

# A language folder name: fr, pt_BR, sr@latin, zh_Hans, ca@valencia; never a path.
_LANGUAGE = re.compile(r"[A-Za-z]{2,3}(?:[_@.-][A-Za-z0-9]+)*")


def _language(text: str) -> str:
    if not _LANGUAGE.fullmatch(text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a language folder name such as fr, pt_BR or sr@latin")
    return text


def _count(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


_language.__name__ = "language code"
_count.__name__ = "integer >= 1"


def add_data(commands, fmt, shared: argparse.ArgumentParser) -> None:
    """Register ``data`` (with its sub-command ``gettext``) on the sub-command parsers ``commands``, with the options
    every command takes (``shared``)."""
    from bitext_hf.cli.parser import EPILOG_EXIT

    data = commands.add_parser(
        "data",
        parents=[shared],
        help="build parallel data without writing code: `data gettext` (the installed translation catalogs)",
        formatter_class=fmt,
        epilog="Run `bitext-hf data gettext --help` for examples.",
    )
    data.set_defaults(func=lambda args: _no_data_command(data))
    sub = data.add_subparsers(dest="data_command", metavar="{gettext}")
    p = sub.add_parser(
        "gettext",
        parents=[shared],
        help="English-xx pairs from the gettext catalogs installed on this machine (--list: languages and counts)",
        formatter_class=fmt,
        epilog=EPILOG_GETTEXT + "\n" + EPILOG_EXIT,
    )
    what = p.add_mutually_exclusive_group()
    what.add_argument("--list", action="store_true", help="print the languages found with their pair counts")
    what.add_argument(
        "--out",
        metavar="FILE",
        help="write the pairs here (.tsv, .csv, .jsonl, .parquet; - for stdout); with several --lang it must hold "
        "{lang}, e.g. pairs.{lang}.tsv. Written atomically, never over a catalog",
    )
    p.add_argument(
        "--lang",
        nargs="+",
        type=_language,
        metavar="LANG",
        help="language folder(s): fr, pt_BR, sr@latin (English is the msgid side); with --list, list only these",
    )
    p.add_argument(
        "--format", choices=("tsv", "csv", "jsonl", "parquet"), default=None, help="output format, whatever the name"
    )
    p.add_argument(
        "--catalogs",
        action="append",
        default=[],
        metavar="DIR",
        help="also search this folder of <lang>/LC_MESSAGES/*.mo|*.po catalogs (repeatable); a catalog here that "
        "cannot be read is an error (exit 3), not skipped",
    )
    p.add_argument(
        "--no-system-catalogs",
        action="store_true",
        help="search only the --catalogs folders (a reproducible set instead of what this machine has installed)",
    )
    p.add_argument(
        "--max-pairs",
        type=_count,
        default=None,
        metavar="N",
        help="keep the first N pairs of each language (catalog order)",
    )
    p.add_argument(
        "--min-words",
        type=_count,
        default=1,
        metavar="N",
        help="drop pairs whose English has fewer words (placeholders such as %%s not counted; default 1)",
    )
    p.set_defaults(func=cmd_data_gettext)


def _no_data_command(parser: argparse.ArgumentParser) -> int:
    parser.print_help(sys.stderr)
    return EXIT_USAGE


def _roots(args) -> list:
    from pathlib import Path

    from bitext_hf.data.gettext import locale_roots

    if args.no_system_catalogs and not args.catalogs:
        raise UsageError("--no-system-catalogs needs at least one --catalogs DIR")
    for folder in args.catalogs:
        if not Path(folder).is_dir():
            raise DataValidationError(f"--catalogs {folder}: no such folder")
    return locale_roots(args.catalogs, system=not args.no_system_catalogs)


def _pairs(lang: str, roots: list, args) -> GettextPairs:
    """``lang``'s pairs: a catalog under a --catalogs folder that cannot be read is the user's bad data (exit 3),
    one of this machine's is skipped with a warning."""
    from bitext_hf.data.gettext import collect_gettext_pairs

    found = collect_gettext_pairs(lang, roots, min_words=args.min_words, strict_roots=args.catalogs)
    if args.max_pairs is not None:
        found.pairs = found.pairs[: args.max_pairs]
    return found


def _left_out(found: list[GettextPairs]) -> str:
    """What the pairs miss and why, for the report line ("" when nothing was left out)."""
    from bitext_hf.data.readers import DEFAULT_MAX_LINE_CHARS

    counts = (
        (sum(len(item.skipped_catalogs) for item in found), "unreadable catalog(s), see the warnings"),
        (sum(item.unusable_entries for item in found), "message(s) holding a NUL or an unpaired surrogate"),
        (sum(item.too_long for item in found), f"pair(s) longer than {DEFAULT_MAX_LINE_CHARS} characters"),
    )
    parts = [f"{count} {what}" for count, what in counts if count]
    return f"; left out: {', '.join(parts)}" if parts else ""


def _refuse_catalog_output(out: str) -> None:
    """``UsageError`` for an output named like a catalog or holding one (any catalog: the ones read are refused as
    inputs too), so the pairs never replace a catalog, nor appear where catalogs are searched for."""
    from bitext_hf.data.catalog_reader import is_catalog_file

    if out != "-" and is_catalog_file(out):
        raise UsageError(
            f"--out {out}: is a gettext catalog (.mo / .po, by its name or its content); data gettext never writes "
            "over a catalog: give a .tsv, .csv, .jsonl or .parquet path"
        )


def cmd_data_gettext(args) -> int:
    if args.list:
        if args.format:
            raise UsageError("--format goes with --out; --list prints to stdout")
        return _list(args)
    if not args.lang or not args.out:
        raise UsageError("give --lang LANG and --out FILE (or --list to see the languages)")
    return _write(args)


def _list(args) -> int:
    from bitext_hf.data.gettext import find_catalogs, gettext_languages

    roots = _roots(args)
    languages = list(dict.fromkeys(args.lang)) if args.lang else gettext_languages(roots)
    if not languages:
        raise DataValidationError(
            f"no gettext catalogs under {len(roots)} folder(s) (<root>/<lang>/LC_MESSAGES/*.mo); install translated "
            "packages or add a folder with --catalogs DIR"
        )
    if not args.quiet:
        print(f"reading the catalogs of {len(languages)} language(s)...", file=sys.stderr)
    from tqdm.auto import tqdm

    rows, read = [], []
    # A bar on stderr while the catalogs are read (a minute for every language of a desktop system); tqdm draws it
    # only where stderr is a terminal, and -q turns it off.
    progress = tqdm(languages, desc="catalogs", unit="language", disable=args.quiet or not sys.stderr.isatty())
    for lang in progress:
        catalogs = find_catalogs(lang, roots)
        found = _pairs(lang, roots, args) if catalogs else None
        if found is not None:
            read.append(found)
        rows.append((lang, len(found.pairs) if found else 0, len(catalogs)))
    rows.sort(key=lambda row: (-row[1], row[0]))
    listed = [row for row in rows if row[1] or args.lang]
    width = max(len(lang) for lang, _, _ in listed) if listed else 0
    for lang, pairs, catalogs in listed:
        print(f"{lang:<{width}}  {pairs:>7} pairs  {catalogs:>5} catalogs")
    empty = len(rows) - sum(1 for row in rows if row[1])
    print(
        f"{sum(1 for row in rows if row[1])} language(s) with pairs, {sum(row[1] for row in rows)} pairs in all, "
        f"from {sum(row[2] for row in rows)} catalogs"
        + (f"; {empty} language(s) without a usable pair" if empty else "")
        + _left_out(read)
    )
    return EXIT_OK


def _write(args) -> int:
    from bitext_hf.data.gettext import find_catalogs
    from bitext_hf.io import check_output_path, protect_inputs
    from bitext_hf.mining.output import output_format

    languages = list(dict.fromkeys(args.lang))
    if len(languages) > 1 and "{lang}" not in args.out:
        raise UsageError(f"--out {args.out}: with several languages, put {{lang}} in the name (pairs.{{lang}}.tsv)")
    roots = _roots(args)
    # Cheap checks first: every language has catalogs and every output path can be written, before any reading.
    catalogs = {lang: find_catalogs(lang, roots) for lang in languages}
    missing = [lang for lang, found in catalogs.items() if not found]
    if missing:
        raise DataValidationError(
            f"no gettext catalogs for {', '.join(missing)} under {len(roots)} folder(s) "
            "(<root>/<lang>/LC_MESSAGES/*.mo); `bitext-hf data gettext --list` shows the languages found"
        )
    every_catalog = [path for found in catalogs.values() for path in found]
    protect_inputs(every_catalog)
    outputs = {lang: args.out.replace("{lang}", lang) for lang in languages}
    formats = {}
    for lang, out in outputs.items():
        check_output_path(out, inputs=every_catalog)
        _refuse_catalog_output(out)
        formats[lang] = output_format(out, args.format)
    found = {lang: _pairs(lang, roots, args) for lang in languages}
    pairs = {lang: item.pairs for lang, item in found.items()}
    empty = [lang for lang, kept in pairs.items() if not kept]
    if empty:
        raise DataValidationError(
            f"no usable pair in the {sum(len(catalogs[lang]) for lang in empty)} catalog(s) of {', '.join(empty)} "
            "(untranslated, without letters, or below --min-words); nothing was written"
        )
    report = sys.stderr if args.out in ("-", "/dev/stdout") else sys.stdout
    for lang in languages:
        _write_pairs(pairs[lang], lang, outputs[lang], formats[lang])
        if len(languages) > 1:
            print(f"wrote {len(pairs[lang])} English-{lang} pairs to {outputs[lang]}", file=report)
    total = sum(len(found) for found in pairs.values())
    where = "stdout" if args.out == "-" else (outputs[languages[0]] if len(languages) == 1 else args.out)
    print(
        f"wrote {total} English-{'/'.join(languages)} pairs from {len(every_catalog)} catalogs to {where}"
        + (f" (at most {args.max_pairs} per language)" if args.max_pairs else "")
        + _left_out(list(found.values())),
        file=report,
    )
    return EXIT_OK


def _write_pairs(pairs: list[tuple[str, str]], lang: str, out: str, fmt: str) -> None:
    """``pairs`` as ``fmt``, columns ``en`` and ``lang``; cleaned messages are one line without tabs, so TSV (without
    a header: two plain columns) holds every pair as it is."""
    from bitext_hf.io.tables import write_table

    columns = {"en": [en for en, _ in pairs], lang: [xx for _, xx in pairs]}
    write_table(out, fmt, columns, tsv_header=False)
