"""Readers for the corpus formats of the field. Each validates its input and fails with one line naming the file
(and line) of the problem, before any work is done on it.

Formats: plain text (a sentence a line), TSV pairs, Moses-style parallel files (two aligned plain-text files), BUCC
files (``id<TAB>sentence`` plus a gold file of ``src_id<TAB>tgt_id`` lines), and the pairs files the package itself
writes (``mine`` / ``score`` and ``data gettext``: TSV, CSV, JSON Lines, Parquet; :func:`read_pairs`); the MTEB
format is in ``mteb.py``,
``.npy`` embeddings in ``embeddings.py``. Every input may be ``-`` (stdin), a pipe or a compressed file
(``bitext_hf.io.open_input``).
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import logging
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from bitext_hf.errors import DataValidationError, UsageError
from bitext_hf.io import MAX_INPUT_BYTES_ENV, compression_of, iter_input_chunks, max_input_bytes, read_input_bytes

__all__ = [
    "DEFAULT_MAX_LINE_CHARS",
    "BitextTask",
    "DataValidationError",
    "check_aligned_inputs",
    "decode_text",
    "deduplicate",
    "display_name",
    "read_aligned",
    "read_bucc",
    "read_lines",
    "read_moses",
    "read_pairs",
    "read_tsv_pairs",
    "split_lines",
]

logger = logging.getLogger(__name__)

# Longer lines are almost always broken input (a whole document on one line, a binary file); encoders truncate far
# earlier, so mining such a line would silently compare only its beginning.
DEFAULT_MAX_LINE_CHARS = 10_000


# Line breaks are \r\n, \n and a lone \r (classic Mac files), nothing else: str.splitlines would also split on \v,
# \f, \x1c-\x1e, \x85, \u2028 and \u2029, which can sit inside a sentence, and shift every later line number.
_BREAK = re.compile(r"\r\n|\r|\n")
_BREAK_BYTES = re.compile(rb"\r\n|\r|\n")

# A line read into a list costs about 60 bytes of memory beyond its text however short it is (a str object and its
# list slot), so the byte bound alone would let a file of very short lines (a bomb of `ab` lines) fill the memory
# with ~20 times its size. The bound therefore also caps the lines: one per 64 bytes of it, which typical text (40
# to 150 bytes a line) never reaches first.
BOUND_BYTES_PER_LINE = 64


def display_name(path: str | os.PathLike) -> str:
    """How messages name an input: the path as given, ``<stdin>`` for ``-``."""
    return "<stdin>" if os.fspath(path) == "-" else os.fspath(path)


def decode_text(path: str | os.PathLike) -> str:
    """The whole input (see ``bitext_hf.io.open_input``) as UTF-8 text without a BOM; empty input, NUL bytes and
    invalid UTF-8 raise ``DataValidationError`` naming the file and line. The input is read a chunk at a time and
    refused at the first chunk holding a NUL byte (``/dev/zero`` after one read), and past the input bound
    (``bitext_hf.io.max_input_bytes``): more bytes than it, or more lines than one per ``BOUND_BYTES_PER_LINE``
    bytes of it."""
    name = display_name(path)
    limit = max_input_bytes()
    max_lines, lines = limit // BOUND_BYTES_PER_LINE, 0
    raw = bytearray()  # grown in place: no second copy of the whole input as a list of chunks is joined
    with contextlib.closing(iter_input_chunks(path, max_bytes=limit)) as chunks:
        for chunk in chunks:
            lines += max(chunk.count(b"\n"), chunk.count(b"\r"))  # \r\n counted once, a lone \r too
            if lines > max_lines:
                raise DataValidationError(
                    f"{name}: holds more than {max_lines} lines, the most an input bound of {limit} bytes allows "
                    f"(one line per {BOUND_BYTES_PER_LINE} bytes: a line costs about that much memory however short); "
                    f"raise it with --max-input-bytes or {MAX_INPUT_BYTES_ENV} if this input is meant to be that large"
                )
            if b"\x00" in chunk:
                end = len(raw) + chunk.index(b"\x00")
                raw += chunk
                line = len(_BREAK_BYTES.split(raw[:end]))
                raise DataValidationError(f"{name}:{line}: NUL byte; this looks like a binary file, not UTF-8 text")
            raw += chunk
    if raw.startswith(b"\xef\xbb\xbf"):
        del raw[:3]
    if not raw or raw.isspace():  # not strip(): that would copy the whole input
        raise DataValidationError(f"{name}: file is empty")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as error:
        line = len(_BREAK_BYTES.split(raw[: error.start]))
        raise DataValidationError(
            f"{name}:{line}: invalid UTF-8 (byte 0x{raw[error.start]:02x}); convert the file to UTF-8, "
            "e.g. `iconv -f latin1 -t utf-8`"
        ) from None


def split_lines(text: str) -> list[str]:
    """Lines of a text, broken at \\r\\n, \\n or a lone \\r; a final line break ends the last line."""
    lines = _BREAK.split(text) if "\r" in text else text.split("\n")  # the common case, without a regex
    if lines and lines[-1] == "":
        lines.pop()  # the final newline ends the last line, it does not start a new one
    return lines


def _decode_lines(path: str | os.PathLike, *, max_chars: int, allow_empty_lines: bool) -> list[str]:
    name = display_name(path)
    lines = split_lines(decode_text(path))
    if not allow_empty_lines and lines and not lines[-1].strip():
        lines.pop()  # one empty line at the end of a file is common and harmless: no sentence is shifted
    for number, line in enumerate(lines, start=1):
        if len(line) > max_chars:
            raise DataValidationError(
                f"{name}:{number}: line of {len(line)} characters exceeds the limit of {max_chars} "
                "(raise it with --max-line-chars if this is intended)"
            )
        if not allow_empty_lines and not line.strip():
            raise DataValidationError(
                f"{name}:{number}: empty line; every line must hold a sentence (line numbers are sentence ids)"
            )
    return lines


def read_lines(
    path: str | os.PathLike, *, max_chars: int = DEFAULT_MAX_LINE_CHARS, allow_empty_lines: bool = False
) -> list[str]:
    """Read a plain-text file with one sentence per line (UTF-8, no NUL bytes, no empty or overlong lines).

    ``path`` may be ``-`` (stdin), a pipe or a ``.gz`` / ``.xz`` / ``.bz2`` / ``.zst`` file; lines end with
    ``\\n``, ``\\r\\n`` or a lone ``\\r``. One empty line at the end of the file is ignored; any other empty
    line is an error naming it, because line numbers are the alignment.
    """
    return _decode_lines(path, max_chars=max_chars, allow_empty_lines=allow_empty_lines)


# Column names that say which column holds each side, as pairs of (source, target): the package's own (``mine`` and
# ``score`` write ``score src_index tgt_index src tgt``), then the usual names of pairs files and of MTEB.
PAIR_COLUMNS = (("src", "tgt"), ("source", "target"), ("sentence1", "sentence2"))
_EXPECTED_COLUMNS = " or ".join(f"{src}/{tgt}" for src, tgt in PAIR_COLUMNS)


def _named_columns(names: Sequence[str]) -> tuple[int, int] | None:
    """The positions of the source and target columns that ``names`` name, else None."""
    folded = [str(name).strip().lower() for name in names]
    for src, tgt in PAIR_COLUMNS:
        if src in folded and tgt in folded:
            return folded.index(src), folded.index(tgt)
    return None


def read_tsv_pairs(
    path: str | os.PathLike,
    *,
    src_column: int | None = None,
    tgt_column: int | None = None,
    max_chars: int = DEFAULT_MAX_LINE_CHARS,
    skip_header: bool | None = None,
) -> tuple[list[str], list[str]]:
    """Read tab-separated sentence pairs; returns aligned (sources, targets).

    Args:
        src_column (int, optional): the source column; by default the one a header names, else 0.
        tgt_column (int, optional): the target column; by default the one a header names, else 1.
        skip_header (bool, optional): drop the first line; by default, a first line that names a source and a
            target column (``src``/``tgt``, ``source``/``target`` or ``sentence1``/``sentence2``, anywhere in the
            line: ``mine``'s own ``score<TAB>src_index<TAB>tgt_index<TAB>src<TAB>tgt``) is taken as a header, and
            its columns are read.

    A line holds exactly the columns it declares: without a header, no more than the columns read (two by default,
    ``source<TAB>target``); with one, no more than the header names. A sentence cannot hold a tab, so a line with
    more is refused (``DataValidationError`` naming the file and line) rather than read with the rest of it dropped.
    """
    name = display_name(path)
    lines = _decode_lines(path, max_chars=max_chars, allow_empty_lines=False)
    first = 1
    header = lines[0].split("\t")
    named = _named_columns(header)
    if skip_header is None:
        skip_header = named is not None
    if skip_header:
        lines, first = lines[1:], 2
        if not lines:
            raise DataValidationError(f"{name}: only a header, no sentence pairs")
    src_column = src_column if src_column is not None else (named[0] if skip_header and named else 0)
    tgt_column = tgt_column if tgt_column is not None else (named[1] if skip_header and named else 1)
    sources, targets = [], []
    needed = max(src_column, tgt_column) + 1
    # The columns a line may have: those the header names, else those read. A tab more is a tab inside a sentence
    # (or a column nobody declared): its text would be dropped without a word, so the line is refused instead.
    most = max(len(header), needed) if skip_header else needed
    for number, line in enumerate(lines, start=first):
        cells = line.split("\t")
        if len(cells) < needed:
            raise DataValidationError(
                f"{name}:{number}: expected at least {needed} tab-separated columns, got {len(cells)}"
            )
        if len(cells) > most:
            raise DataValidationError(
                f"{name}:{number}: {len(cells)} tab-separated columns, {_too_many(most, skip_header)}"
            )
        src, tgt = cells[src_column].strip(), cells[tgt_column].strip()
        if not src or not tgt:
            raise DataValidationError(f"{name}:{number}: empty {'source' if not src else 'target'} sentence")
        sources.append(src)
        targets.append(tgt)
    return sources, targets


def _too_many(most: int, header: bool) -> str:
    if header:
        return f"but the header names {most}; a sentence cannot hold a tab"
    return (
        f"expected {most} (source<TAB>target); a sentence cannot hold a tab, and the rest of the line would be "
        "lost: remove the extra tabs, or give the file a first line naming its columns (src and tgt among them)"
    )


def pairs_format(path: str | os.PathLike) -> str:
    """The format of a pairs file by its extension (a compression suffix is looked through): ``csv``, ``jsonl``,
    ``parquet``, else ``tsv`` (also stdin and pipes, whose name says nothing)."""
    file = Path(os.fspath(path))
    if compression_of(file):
        file = file.with_suffix("")
    return {".csv": "csv", ".jsonl": "jsonl", ".parquet": "parquet", ".pq": "parquet"}.get(file.suffix.lower(), "tsv")


def read_pairs(path: str | os.PathLike, *, max_chars: int = DEFAULT_MAX_LINE_CHARS) -> tuple[list[str], list[str]]:
    """Read sentence pairs from any pairs file the package writes, by its extension: TSV (:func:`read_tsv_pairs`),
    CSV, JSON Lines or Parquet, whose source and target columns are the ones named ``src``/``tgt`` (``mine``'s and
    ``score``'s output), ``source``/``target`` or ``sentence1``/``sentence2``, or the only two columns there are
    (``data gettext``'s ``en`` and ``xx``).

    No text is dropped without a word: a TSV line with more tab-separated columns than its header names (or than
    two, without one) and a CSV row with more cells than its header are refused, naming the file and line.

    Raises:
        DataValidationError: one line naming the file (and line or row): unreadable data, no such columns, an empty
            or non-text sentence, a sentence longer than ``max_chars``, a line with more columns than declared.
    """
    fmt = pairs_format(path)
    if fmt == "tsv":
        return read_tsv_pairs(path, max_chars=max_chars)
    name = display_name(path)
    if fmt == "parquet":
        columns, rows, first = _parquet_rows(path, name)
    elif fmt == "csv":
        columns, rows, first = _csv_rows(path, name)
    else:
        columns, rows, first = _jsonl_rows(path, name)
    chosen = _named_columns(columns) or ((0, 1) if len(columns) == 2 else None)
    if chosen is None:
        raise DataValidationError(
            f"{name}: cannot tell the source and target columns among {', '.join(map(str, columns)) or 'none'}; "
            f"expected {_EXPECTED_COLUMNS}, or exactly two columns"
        )
    sources, targets = [], []
    for number, row in enumerate(rows, start=first):
        if fmt == "csv" and len(row) > len(columns):  # an unquoted comma in a sentence: its cells would shift
            raise DataValidationError(
                f"{name}:{number}: {len(row)} comma-separated cells, but the header names {len(columns)}; quote a "
                'sentence that holds a comma ("a, b")'
            )
        pair = []
        for side, column in zip(("source", "target"), chosen):
            text = row[column] if column < len(row) else None
            if not isinstance(text, str) or not text.strip():
                what = "missing" if text is None else ("empty" if isinstance(text, str) else type(text).__name__)
                raise DataValidationError(f"{name}:{number}: {side} sentence ({columns[column]}) is {what}")
            if len(text) > max_chars:
                raise DataValidationError(
                    f"{name}:{number}: {side} sentence of {len(text)} characters exceeds the limit of {max_chars} "
                    "(raise it with --max-line-chars if this is intended)"
                )
            pair.append(text.strip())
        sources.append(pair[0])
        targets.append(pair[1])
    if not sources:
        raise DataValidationError(f"{name}: no sentence pairs")
    return sources, targets


def _csv_rows(path: str | os.PathLike, name: str) -> tuple[list[str], list[list[str]], int]:
    """(header, rows, line of the first row); RFC 4180 quoting (the csv module), so a cell may hold a line break and
    the number given for a row is its place in the file, counting the header as row 1."""
    # newline="": line ends reach the csv module as they are, so that a quoted line break stays in its cell.
    reader = csv.reader(io.StringIO(decode_text(path), newline=""))
    try:
        table = list(reader)
    except csv.Error as error:
        raise DataValidationError(f"{name}:{reader.line_num}: not valid CSV ({error})") from None
    if not table:
        raise DataValidationError(f"{name}: file is empty")
    return table[0], table[1:], 2


def _jsonl_rows(path: str | os.PathLike, name: str) -> tuple[list[str], list[list[object]], int]:
    """(keys of the first object, each line's values under those keys, 1): one JSON object a line."""
    columns: list[str] = []
    rows = []
    for number, line in enumerate(split_lines(decode_text(path)), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            raise DataValidationError(f"{name}:{number}: not valid JSON ({error.msg})") from None
        if not isinstance(record, dict):
            raise DataValidationError(f"{name}:{number}: expected a JSON object, got {type(record).__name__}")
        if not columns:
            columns = list(record)
        rows.append([record.get(column) for column in columns])
    return columns, rows, 1


def _parquet_rows(path: str | os.PathLike, name: str) -> tuple[list[str], list[list[object]], int]:
    """(column names, rows, 1); read from bytes within the input bound (``read_input_bytes``), not by pyarrow from
    the path, so that a compressed file, a pipe and the bound behave as for every other input."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(pa.BufferReader(read_input_bytes(path)))
    except pa.ArrowException as error:
        raise DataValidationError(f"{name}: not a readable Parquet file ({' '.join(str(error).split())})") from None
    columns = table.column_names
    return columns, [list(row.values()) for row in table.to_pylist()], 1


def read_moses(
    src_path: str | os.PathLike, tgt_path: str | os.PathLike, *, max_chars: int = DEFAULT_MAX_LINE_CHARS
) -> tuple[list[str], list[str]]:
    """Read Moses-style parallel files (line i of one is the translation of line i of the other)."""
    sources = read_lines(src_path, max_chars=max_chars)
    targets = read_lines(tgt_path, max_chars=max_chars)
    if len(sources) != len(targets):
        raise DataValidationError(
            f"{display_name(src_path)} has {len(sources)} lines but {display_name(tgt_path)} has {len(targets)}: "
            "parallel files must be line-aligned"
        )
    return sources, targets


def check_aligned_inputs(
    pairs: str | os.PathLike | None, src: str | os.PathLike | None, tgt: str | os.PathLike | None
) -> None:
    """Aligned sentences come from a pairs file or from two parallel files (what :func:`read_aligned` reads), not
    both, not one parallel file alone: ``UsageError`` naming the options (``--pairs``, ``--src``, ``--tgt``) of the
    jobs that read them (``score``, ``eval``), checked when their config is made."""
    if pairs:
        if src or tgt:
            raise UsageError("give either --pairs FILE or --src/--tgt, not both")
    elif not (src and tgt):
        raise UsageError("give --pairs FILE.tsv, or --src and --tgt parallel files")


def read_aligned(
    pairs: str | os.PathLike | None,
    src: str | os.PathLike | None = None,
    tgt: str | os.PathLike | None = None,
    *,
    max_chars: int = DEFAULT_MAX_LINE_CHARS,
) -> tuple[list[str], list[str]]:
    """Aligned sentences (the source and target of each pair, in order): from the pairs file ``pairs``, any that
    :func:`read_pairs` reads, when it is given, else from the Moses-style parallel files ``src`` and ``tgt``
    (:func:`read_moses`)."""
    if pairs:
        return read_pairs(pairs, max_chars=max_chars)
    return read_moses(src, tgt, max_chars=max_chars)


@dataclass
class BitextTask:
    """Sentences of two languages and the gold pairs between them (0-based indices)."""

    sources: list[str]
    targets: list[str]
    gold: list[tuple[int, int]] = field(default_factory=list)
    name: str = ""
    source_ids: list[str] | None = None
    target_ids: list[str] | None = None

    @property
    def is_aligned(self) -> bool:
        """Row i of the sources is the translation of row i of the targets, for every row of both."""
        if len(self.sources) != len(self.targets):
            return False
        return not self.gold or self.gold == [(i, i) for i in range(len(self.sources))]


def _read_bucc_side(path: str | os.PathLike, max_chars: int) -> tuple[list[str], list[str]]:
    name, ids, sentences = display_name(path), [], []
    for number, line in enumerate(_decode_lines(path, max_chars=max_chars, allow_empty_lines=False), start=1):
        sentence_id, sep, sentence = line.partition("\t")
        if not sep or not sentence.strip():
            raise DataValidationError(f"{name}:{number}: expected `id<TAB>sentence`")
        ids.append(sentence_id.strip())
        sentences.append(sentence.strip())
    duplicates = len(ids) - len(set(ids))
    if duplicates:
        raise DataValidationError(f"{name}: {duplicates} duplicate sentence id(s)")
    return ids, sentences


def read_bucc(
    src_path: str | os.PathLike,
    tgt_path: str | os.PathLike,
    gold_path: str | os.PathLike | None = None,
    *,
    max_chars: int = DEFAULT_MAX_LINE_CHARS,
) -> BitextTask:
    """Read BUCC shared-task files: ``id<TAB>sentence`` per language and a gold file of ``src_id<TAB>tgt_id``."""
    src_ids, sources = _read_bucc_side(src_path, max_chars)
    tgt_ids, targets = _read_bucc_side(tgt_path, max_chars)
    gold: list[tuple[int, int]] = []
    if gold_path is not None:
        src_row = {sid: i for i, sid in enumerate(src_ids)}
        tgt_row = {tid: j for j, tid in enumerate(tgt_ids)}
        for number, line in enumerate(_decode_lines(gold_path, max_chars=max_chars, allow_empty_lines=True), 1):
            if not line.strip():
                continue
            cells = line.split("\t")
            if len(cells) != 2 or cells[0] not in src_row or cells[1] not in tgt_row:
                raise DataValidationError(
                    f"{display_name(gold_path)}:{number}: expected `src_id<TAB>tgt_id` with known ids"
                )
            gold.append((src_row[cells[0]], tgt_row[cells[1]]))
    return BitextTask(sources, targets, gold, name=Path(src_path).stem, source_ids=src_ids, target_ids=tgt_ids)


def deduplicate(sentences: Sequence[str]) -> tuple[list[str], list[int]]:
    """Unique sentences (first occurrence order) and, for every input row, the row of its unique sentence."""
    first_row: dict[str, int] = {}
    inverse = [first_row.setdefault(sentence, len(first_row)) for sentence in sentences]
    return list(first_row), inverse
