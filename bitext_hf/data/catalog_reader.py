"""Reading one gettext catalog (``.po`` / ``.mo``) that may be damaged or hostile, and recognising one.

polib parses the entries, but it trusts its input: a ``.mo`` whose tables or strings point past the end of the file
crashes it (``struct.error``) or gives it a string cut short, a count of 2**31 is trusted, a ``.po`` string
without its closing quote yields a truncated message, an unknown charset silently becomes UTF-8 (and a codec that is
not a text encoding, such as ``zlib``, crashes it), and it reads a whole file, a FIFO or ``/dev/zero`` included,
before looking at it. So the file is read here first, bounded and only if it is a regular file, its structure is
checked against the format (the GNU gettext manual, "The Format of GNU MO Files" and "The Format of PO Files"), and
polib gets the checked bytes or text with the charset already decided. Every refusal is a ``DataValidationError``
naming the file (and the line, for a ``.po``).
"""

from __future__ import annotations

import codecs
import itertools
import os
import re
import stat
import struct
from dataclasses import dataclass
from pathlib import Path

from bitext_hf.errors import DataValidationError
from bitext_hf.io.small_files import SmallFileError, read_small_file

__all__ = [
    "CATALOG_SUFFIXES",
    "MAX_CATALOG_BYTES",
    "MAX_CATALOG_ENTRIES",
    "CatalogEntries",
    "is_catalog_file",
    "read_catalog",
]

CATALOG_SUFFIXES = (".mo", ".po")
# The largest catalogs of a desktop system (PostgreSQL's, LibreOffice's) are a few MB; 64 MiB leaves room for any
# real one while a lying or multi-GB file is refused from its size, before a byte of it is read.
MAX_CATALOG_BYTES = 64 * 2**20
# polib holds about 700 bytes per entry: the count is bounded too, at 20 times the largest catalog of a desktop
# system (ISO 639-3's language names, about 9,300), so a small file of tiny entries cannot take gigabytes.
MAX_CATALOG_ENTRIES = 200_000

_MO_BYTE_ORDER = {b"\xde\x12\x04\x95": "<", b"\x95\x04\x12\xde": ">"}
_MO_HEADER_BYTES = 28  # magic, revision, count, two table offsets, hash table size and offset
# A message that no text file of pairs can hold: a NUL (every reader of the package refuses it) or a lone surrogate
# (not encodable as UTF-8; a charset such as unicode_escape can produce one).
_UNUSABLE = re.compile(r"[\x00\ud800-\udfff]")
_CHARSET = re.compile(rb"Content-Type:[^\n\"]*?charset=([^\s\"\\;]+)", re.IGNORECASE)
# A .po line that polib reads as part of a message: a keyword with its string, or a continuation string.
_PO_STRING_LINE = re.compile(r'(?:(?:msgctxt|msgid|msgid_plural|msgstr(?:\[\d+\])?)\s*)?"(?:[^"\\]|\\.)*"')
_PO_KEYWORD_OR_QUOTE = re.compile(r'(?:msgctxt|msgid|msgid_plural|msgstr)\b|"')
_PO_MSGID = re.compile(rb"^[ \t]*(?:#~[ \t]*)?msgid[ \t]", re.MULTILINE)
_LINE_BREAK = re.compile(r"\r\n|\r|\n")
# What tells a .po apart from other text at the start of a file: both keywords opening a line with a string.
_PO_MSGID_LINE = re.compile(rb'^[ \t]*msgid[ \t]+"', re.MULTILINE)
_PO_MSGSTR_LINE = re.compile(rb'^[ \t]*msgstr(?:\[\d+\])?[ \t]+"', re.MULTILINE)
# polib splits a .po text with str.splitlines, which also breaks at these, where gettext (and polib reading a path)
# breaks only at \n and \r: a raw one inside a quoted string would cut the message in two. \v and \f have escapes
# that polib undoes; the others have none, and are whitespace that clean_message turns into a space anyway.
_SPLITLINES_ONLY = str.maketrans(
    {"\v": "\\v", "\f": "\\f", "\x1c": " ", "\x1d": " ", "\x1e": " ", "\x85": " ", "\u2028": " ", "\u2029": " "}
)


@dataclass(frozen=True)
class CatalogEntries:
    """The (English msgid, translation) pairs of one catalog, and how many translated entries were left out because
    a text file of pairs cannot hold them (``unusable``: a NUL character or an unpaired surrogate)."""

    path: Path
    pairs: list[tuple[str, str]]
    unusable: int = 0


def _unreadable(path: Path, reason: str, line: int | None = None) -> DataValidationError:
    where = f"{path}:{line}" if line is not None else str(path)
    return DataValidationError(f"{where}: not a readable gettext catalog ({reason})")


def _non_regular(mode: int) -> str | None:
    if stat.S_ISREG(mode):
        return None
    return "it is a folder" if stat.S_ISDIR(mode) else "not a regular file: a FIFO, a device or a socket"


def _read_catalog_bytes(path: Path) -> bytes:
    """The bytes of ``path``, a regular file of at most :data:`MAX_CATALOG_BYTES`. Anything else is refused before
    it is opened (opening a device can act on it); ``read_small_file`` checks the open file again (a file swapped in
    after this check) and bounds the read."""
    try:
        kind = _non_regular(os.stat(path).st_mode)
        if kind is not None:
            raise _unreadable(path, kind)
        return read_small_file(path, MAX_CATALOG_BYTES)
    except SmallFileError as error:
        raise _unreadable(path, str(error)) from None
    except OSError as error:
        raise _unreadable(path, error.strerror or type(error).__name__) from None


def _charset(path: Path, header: bytes) -> str:
    """The charset the catalog's header declares, checked to be a text encoding Python knows; none declared (or
    the template placeholder ``CHARSET``) means ASCII, of which UTF-8 is the superset."""
    match = _CHARSET.search(header)
    if match is None or match.group(1).upper() == b"CHARSET":
        return "utf-8"
    name = match.group(1).decode("ascii", "replace")
    try:
        codecs.lookup(name)
        b"".decode(name)  # a known codec that is not a text encoding (zlib, hex, rot13) raises here
    except LookupError as error:
        raise _unreadable(path, f"charset {name!r}: {error}") from None
    return name


def _check_mo(path: Path, data: bytes) -> str:
    """The charset of a ``.mo`` whose header, both tables and every string lie inside the file, each
    string followed by the NUL the format puts after it; the tables neither overlap each other nor the header."""
    size = len(data)
    order = _MO_BYTE_ORDER.get(data[:4])
    if order is None:
        raise _unreadable(path, "not a .mo file: wrong magic number")
    if size < _MO_HEADER_BYTES:
        raise _unreadable(path, f"truncated: {size} bytes, shorter than the {_MO_HEADER_BYTES}-byte header")
    revision, count, originals, translations = struct.unpack_from(f"{order}4I", data, 4)
    if revision >> 16 not in (0, 1):
        raise _unreadable(path, f"unknown .mo format revision {revision >> 16}")
    if count > MAX_CATALOG_ENTRIES:
        raise _unreadable(path, f"{count} entries, more than the {MAX_CATALOG_ENTRIES} a catalog may hold")
    table_bytes = 8 * count
    for name, offset in (("original", originals), ("translation", translations)):
        if offset < _MO_HEADER_BYTES or offset + table_bytes > size:
            raise _unreadable(
                path,
                f"truncated or corrupt: its {name} table of {count} entries at byte {offset} lies outside "
                f"the file's {size} bytes",
            )
    if count and originals < translations + table_bytes and translations < originals + table_bytes:
        raise _unreadable(path, "corrupt: its original and translation tables overlap")
    strings = [
        *struct.iter_unpack(f"{order}2I", data[originals : originals + table_bytes]),
        *struct.iter_unpack(f"{order}2I", data[translations : translations + table_bytes]),
    ]
    for length, offset in strings:
        if offset + length >= size or data[offset + length] != 0:
            raise _unreadable(
                path,
                f"truncated or corrupt: a string of {length} bytes at byte {offset} runs past "
                f"the file's {size} bytes or its end",
            )
    header = b""
    if count:
        translated_length, translated_offset = strings[count]
        if strings[0][0] == 0:  # the header entry: the empty msgid, sorted first
            header = data[translated_offset : translated_offset + translated_length]
    return _charset(path, header)


def _check_po(path: Path, data: bytes) -> tuple[str, str]:
    """(text, charset) of a ``.po`` whose every message line is a keyword with a complete quoted string or a
    complete continuation string, with the characters polib would split lines at made safe."""
    msgids = [match.start() for match in itertools.islice(_PO_MSGID.finditer(data), MAX_CATALOG_ENTRIES + 1)]
    if len(msgids) > MAX_CATALOG_ENTRIES:
        raise _unreadable(path, f"{len(msgids)} entries, more than the {MAX_CATALOG_ENTRIES} a catalog may hold")
    charset = _charset(path, data[: msgids[1]] if len(msgids) > 1 else data)  # the header is the first entry
    try:
        text = data.decode(charset)
    except UnicodeError as error:
        raise _unreadable(path, f"not {charset} text: {error}") from None
    text = text.removeprefix("\ufeff")
    for number, raw_line in enumerate(_LINE_BREAK.split(text), start=1):
        line = raw_line.strip()
        if line.startswith("#~") and not line.startswith("#~|"):
            line = line[2:].strip()  # an obsolete entry: polib parses it as a message too
        elif line.startswith("#") or not line:
            continue
        if not _PO_STRING_LINE.fullmatch(line):
            reason = "unterminated string" if _PO_KEYWORD_OR_QUOTE.match(line) else "not a .po message line"
            raise _unreadable(path, reason, number)
    text = text.translate(_SPLITLINES_ONLY)
    # polib.pofile takes a string that names an existing file for that file's path and reads it instead.
    if os.path.exists(text):
        raise _unreadable(path, "its content is the path of another file")
    return text, charset


def _parse(path: Path, data: bytes):
    import polib

    try:
        if path.suffix.lower() == ".mo":
            charset = _check_mo(path, data)
            # The bytes hold NULs (the revision field), so polib cannot take them for a path.
            return polib.mofile(data, encoding=charset)
        text, charset = _check_po(path, data)
        return polib.pofile(text, encoding=charset)
    except DataValidationError:
        raise
    # polib's own refusals (IOError on a syntax error), a decoding error, and what a malformed state gives it.
    except (OSError, ValueError, LookupError, UnicodeError, KeyError, IndexError, struct.error) as error:
        raise _unreadable(path, str(error) or type(error).__name__) from None


def read_catalog(path: str | os.PathLike, *, include_fuzzy: bool = False) -> CatalogEntries:
    """(English msgid, translation) pairs of a ``.po`` or ``.mo`` catalog: untranslated, obsolete and (by default)
    fuzzy entries are skipped; plural entries give their singular form; an entry holding a NUL character or an
    unpaired surrogate is left out and counted. A catalog that is not a regular file, larger than
    :data:`MAX_CATALOG_BYTES`, truncated, inconsistent, in an unknown charset or with a string left open raises
    ``DataValidationError`` naming it (and the line)."""
    path = Path(path)
    catalog = _parse(path, _read_catalog_bytes(path))
    pairs, unusable = [], 0
    for entry in catalog:
        if not entry.msgid or entry.obsolete or ("fuzzy" in entry.flags and not include_fuzzy):
            continue
        translation = entry.msgstr or (entry.msgstr_plural.get(0) if entry.msgstr_plural else "")
        if not translation:
            continue
        if _UNUSABLE.search(entry.msgid) or _UNUSABLE.search(translation):
            unusable += 1
            continue
        pairs.append((entry.msgid, translation))
    return CatalogEntries(path, pairs, unusable)


def is_catalog_file(path: str | os.PathLike) -> bool:
    """Whether ``path`` is named like a catalog (``.mo``, ``.po``) or, followed to a regular file, holds one: the
    ``.mo`` magic number, or a ``.po``'s ``msgid "`` and ``msgstr "`` lines in its first 64 KiB. Nothing but a
    regular file is opened (a FIFO would block)."""
    if Path(path).suffix.lower() in CATALOG_SUFFIXES:
        return True
    try:
        if _non_regular(os.stat(path).st_mode) is not None:
            return False
        # Without blocking, should a FIFO be swapped in after the check; only the start is read, whatever the size.
        with open(
            os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)), "rb"
        ) as handle:
            head = handle.read(64 * 1024)
    except OSError:
        return False
    if head[:4] in _MO_BYTE_ORDER:
        return True
    return bool(_PO_MSGID_LINE.search(head) and _PO_MSGSTR_LINE.search(head))
