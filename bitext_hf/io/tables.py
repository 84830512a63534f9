"""One writer for the package's tables of pairs (mined pairs, aligned beads, gettext pairs): TSV, CSV, JSON Lines
or Parquet, written atomically (``-``: stdout) through :func:`bitext_hf.io.atomic_output`.

A table is named columns of equal length. What a cell holds may differ by format, so a caller can give, beside the
values (Parquet's cells, with optional Arrow types), the text of the cells for TSV and CSV and the JSON values for
JSON Lines: a score rounded to six decimals is ``"0.123400"`` in TSV, ``0.1234`` in JSON and a float32 in Parquet.
:func:`output_format` tells the format of an output path, for every command that writes such a table.
"""

from __future__ import annotations

import csv
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from bitext_hf.errors import UsageError
from bitext_hf.io.outputs import atomic_output, writes_in_place

__all__ = ["TABLE_FORMATS", "output_format", "write_table"]

TABLE_FORMATS = ("tsv", "csv", "jsonl", "parquet")
_EXTENSIONS = {".tsv": "tsv", ".txt": "tsv", ".csv": "csv", ".jsonl": "jsonl", ".parquet": "parquet", ".pq": "parquet"}


def output_format(path: str | os.PathLike, format: str | None = None) -> str:
    """The format to write: ``format`` when given, else from the extension; TSV for a stream (``-`` for stdout, an
    existing FIFO or device such as ``/dev/stdout``), whose name says nothing about a format. A stream is what
    :func:`bitext_hf.io.writes_in_place` says is written in place, the one rule the writer follows too: a new file
    under ``/dev/shm`` is a regular file, written in the format its extension names.

    Raises:
        UsageError: an unknown ``format``, or an extension that names no format and no ``format`` given.
    """
    if format is not None:
        if format not in TABLE_FORMATS:
            raise UsageError(f"unknown output format {format!r}; choose one of {', '.join(TABLE_FORMATS)}")
        return format
    if writes_in_place(path):
        return "tsv"
    suffix = Path(path).suffix.lower()
    if suffix not in _EXTENSIONS:
        raise UsageError(
            f"{path}: cannot tell the output format from the extension {suffix or '(none)'!r}; name the file "
            f"{', '.join('.' + f for f in TABLE_FORMATS)}, or say --format {'|'.join(TABLE_FORMATS)}"
        )
    return _EXTENSIONS[suffix]


def write_table(
    path: str | os.PathLike,
    format: str,
    columns: Mapping[str, Sequence[Any]],
    *,
    cells: Mapping[str, Sequence[str]] | None = None,
    records: Mapping[str, Sequence[Any]] | None = None,
    types: Mapping[str, str] | None = None,
    tsv_header: bool = True,
) -> None:
    """Write the rows of ``columns`` to ``path`` as ``format``.

    Args:
        columns: name -> values, in column order; Parquet's cells, typed by ``types`` (name -> an Arrow type's name:
            ``"float32"``, ``"int64"``, ``"string"``, ``"list<int64>"``; by names, so that only Parquet imports
            pyarrow).
        cells: name -> text of each cell in TSV and CSV (default: ``str`` of the values).
        records: name -> JSON value of each cell in JSON Lines (default: the values).
        tsv_header: TSV starts with the column names (CSV always does; JSON Lines and Parquet name every cell).
    """
    if format not in TABLE_FORMATS:
        raise ValueError(f"unknown table format {format!r}; choose one of {', '.join(TABLE_FORMATS)}")
    names = list(columns)
    if format == "parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        kinds = {name: _arrow_type(kind) for name, kind in (types or {}).items()}
        table = pa.table({name: pa.array(list(columns[name]), kinds.get(name)) for name in names})
        with atomic_output(path, "wb") as handle:
            pq.write_table(table, handle)
        return
    if format == "jsonl":
        values = {**columns, **(records or {})}
        with atomic_output(path) as handle:
            for row in zip(*(values[name] for name in names)):
                handle.write(json.dumps(dict(zip(names, row)), ensure_ascii=False) + "\n")
        return
    text = {
        **{name: list(map(str, columns[name])) for name in names if not cells or name not in cells},
        **(cells or {}),
    }
    rows = zip(*(text[name] for name in names))
    with atomic_output(path) as handle:
        if format == "csv":
            writer = csv.writer(handle)  # RFC 4180: quotes cells with commas, quotes or line breaks
            writer.writerow(names)
            writer.writerows(rows)
            return
        if tsv_header:
            handle.write("\t".join(names) + "\n")
        handle.writelines("\t".join(row) + "\n" for row in rows)


def _arrow_type(name: str) -> Any:
    import pyarrow as pa

    if name.startswith("list<") and name.endswith(">"):
        return pa.list_(_arrow_type(name[len("list<") : -1]))
    return pa.type_for_alias(name)
