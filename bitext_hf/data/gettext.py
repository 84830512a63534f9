"""Translation pairs from gettext message catalogs (``.po`` / ``.mo``).

Software localisation catalogs are genuine human translations of English interface messages, the same kind of data
as OPUS's GNOME / KDE / Ubuntu corpora. Every Linux machine and many Python packages carry thousands of them, in
close to two hundred languages, which makes them the offline source of real parallel data for this package.
"""

from __future__ import annotations

import logging
import os
import re
import site
import sys
from collections.abc import Iterable
from pathlib import Path

from bitext_hf.data.readers import DataValidationError

__all__ = ["clean_message", "find_catalogs", "gettext_pairs", "read_gettext"]

logger = logging.getLogger(__name__)

DEFAULT_LOCALE_ROOTS = ("/usr/share/locale", "/usr/share/locale-langpack", "/usr/local/share/locale")

# Keyboard accelerators: GTK "_File", KDE/Qt "&File"; a literal "&&" / "__" stays a single character.
_ACCELERATOR = re.compile(r"(?<![_&\w])[_&](?=\w)")
_WHITESPACE = re.compile(r"\s+")
_LETTER = re.compile(r"[^\W\d_]")
# printf / Python / brace placeholders: not words, so they neither make a message long enough nor make it text.
_PLACEHOLDER = re.compile(r"%(?:\(\w+\))?[-+ #0]*\d*(?:\.\d+)?[hlLqjzt]*[a-zA-Z%]|\$?\{[^{}]*\}")


def clean_message(text: str) -> str:
    """One-line, accelerator-free form of a catalog message."""
    text = _ACCELERATOR.sub("", text.replace("&&", "&"))
    return _WHITESPACE.sub(" ", text).strip()


def read_gettext(path: str | os.PathLike, *, include_fuzzy: bool = False) -> list[tuple[str, str]]:
    """(English msgid, translation) pairs of a ``.po`` or ``.mo`` catalog: untranslated, obsolete and (by default)
    fuzzy entries are skipped; plural entries give their singular form."""
    import polib

    path = Path(path)
    if not path.is_file():
        raise DataValidationError(f"{path}: no such catalog file")
    try:
        catalog = polib.mofile(str(path)) if path.suffix.lower() == ".mo" else polib.pofile(str(path))
    except (OSError, ValueError, UnicodeDecodeError) as error:
        raise DataValidationError(f"{path}: not a readable gettext catalog ({error})") from None
    pairs = []
    for entry in catalog:
        if not entry.msgid or entry.obsolete or ("fuzzy" in entry.flags and not include_fuzzy):
            continue
        translation = entry.msgstr or (entry.msgstr_plural.get(0) if entry.msgstr_plural else "")
        if translation:
            pairs.append((entry.msgid, translation))
    return pairs


def _python_locale_dirs() -> list[Path]:
    roots = []
    for base in {*site.getsitepackages(), site.getusersitepackages(), sys.prefix}:
        base_path = Path(base)
        if base_path.is_dir():
            roots.extend(p for pattern in ("*/locale", "*/*/locale", "*/*/*/locale") for p in base_path.glob(pattern))
    return roots


def find_catalogs(lang: str, roots: Iterable[str | os.PathLike] | None = None) -> list[Path]:
    """Catalog files (``.mo`` and ``.po``) for language folder ``lang`` (e.g. "fr", "pt_BR") under ``roots``
    (by default the system locale folders and the ``locale`` folders of installed Python packages), sorted."""
    folders = [Path(r) for r in roots] if roots is not None else [Path(r) for r in DEFAULT_LOCALE_ROOTS]
    if roots is None:
        folders += _python_locale_dirs()
    found = set()
    for folder in folders:
        messages = folder / lang / "LC_MESSAGES"
        if messages.is_dir():
            found.update(p for p in messages.iterdir() if p.suffix in (".mo", ".po"))
    return sorted(found)


def gettext_pairs(
    lang: str,
    roots: Iterable[str | os.PathLike] | None = None,
    *,
    min_chars: int = 1,
    min_words: int = 1,
) -> list[tuple[str, str]]:
    """All (English, ``lang``) pairs from the installed catalogs, cleaned and deduplicated.

    Messages are made one-line and accelerator-free; pairs without letters, shorter than ``min_chars`` or
    ``min_words`` (English side), or left untranslated (translation == English) are dropped. Each English message
    and each translation appears at most once (the first catalog in path order wins), so the result is a 1:1 gold
    alignment usable for retrieval evaluation.
    """
    catalogs = find_catalogs(lang, roots)
    if not catalogs:
        raise DataValidationError(
            f"no gettext catalogs found for language {lang!r} (looked for <root>/{lang}/LC_MESSAGES/*.mo); "
            "install translated packages or pass roots="
        )
    seen_src, seen_tgt, pairs = set(), set(), []
    for catalog in catalogs:
        try:
            entries = read_gettext(catalog)
        except DataValidationError as error:
            logger.warning("skipping %s", error)
            continue
        for msgid, msgstr in entries:
            src, tgt = clean_message(msgid), clean_message(msgstr)
            src_words = _PLACEHOLDER.sub(" ", src)
            if (
                len(src) < min_chars
                or len(src_words.split()) < min_words
                or not _LETTER.search(src_words)
                or not _LETTER.search(_PLACEHOLDER.sub(" ", tgt))
                or src == tgt
                or src in seen_src
                or tgt in seen_tgt
            ):
                continue
            seen_src.add(src)
            seen_tgt.add(tgt)
            pairs.append((src, tgt))
    return pairs
