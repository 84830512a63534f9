"""Writing mined pairs as TSV, CSV, JSON Lines or Parquet, always atomically (``-`` is stdout).

Columns, in every format: ``score src_index tgt_index src tgt`` (0-based line numbers), then ``doc_id`` for
document-level mining. The file appears complete or not at all (:func:`bitext_hf.io.atomic_output`).

TSV is the plain ``cut``-able format: a sentence holding a tab or a line break cannot be written in it, and
:func:`check_representable` says so (naming the file and line) before any encoding. CSV (RFC 4180 quoting, through
the ``csv`` module), JSON Lines and Parquet hold any text.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from bitext_hf.errors import DataValidationError
from bitext_hf.io.tables import TABLE_FORMATS, output_format, write_table
from bitext_hf.mining.retrieval import MinedPairs

__all__ = ["FORMATS", "TSV_HEADER", "check_representable", "output_format", "write_pairs"]

TSV_HEADER = ("score", "src_index", "tgt_index", "src", "tgt")
FORMATS = TABLE_FORMATS
# Characters that end a TSV cell or row for the usual readers (cut, pandas, the csv module's excel-tab dialect).
_TSV_BREAKERS = {"\t": "a tab", "\n": "a line break", "\r": "a carriage return"}


def check_representable(texts: Sequence[str] | None, path_of_texts: str | os.PathLike, format: str) -> None:
    """Refuse sentences the output format cannot hold, naming ``path_of_texts`` and the 1-based line.

    Only TSV has such sentences (a tab, a line break or a carriage return would shift or split the row).

    Raises:
        DataValidationError: the first such sentence.
    """
    if format != "tsv" or texts is None:
        return
    for number, text in enumerate(texts, start=1):
        for char, name in _TSV_BREAKERS.items():
            if char in text:
                raise DataValidationError(
                    f"{path_of_texts}:{number}: the sentence contains {name}, which TSV output cannot hold; "
                    "write .csv, .jsonl or .parquet instead (or --format csv|jsonl|parquet)"
                )


def _text_column(texts: Sequence[str] | None, indices: list[int]) -> list[str]:
    return [""] * len(indices) if texts is None else [texts[i] for i in indices]


def _doc_column(doc_ids: np.ndarray | None) -> list | None:
    if doc_ids is None:
        return None
    values = np.asarray(doc_ids).tolist()
    # Document ids read from a file are strings; ids given from Python may be ints (kept in JSON / Parquet).
    return values if all(isinstance(v, int | str) for v in values) else [str(v) for v in values]


def write_pairs(
    pairs: MinedPairs,
    path: str | os.PathLike,
    *,
    src_texts: Sequence[str] | None = None,
    tgt_texts: Sequence[str] | None = None,
    format: str | None = None,
) -> Path:
    """Write ``pairs`` with their sentences (empty when texts are not given) to ``path`` (``-``: stdout).

    Args:
        format (str, optional): "tsv", "csv", "jsonl" or "parquet"; by default taken from the extension
            (.tsv/.txt, .csv, .jsonl, .parquet/.pq).

    Raises:
        UsageError: the format cannot be told (see :func:`output_format`).
        DataValidationError: in TSV, a sentence holding a tab or a line break (see :func:`check_representable`).
    """
    fmt = output_format(path, format)
    if fmt == "tsv":
        check_representable(src_texts, "source texts", fmt)
        check_representable(tgt_texts, "target texts", fmt)
    src_indices, tgt_indices = pairs.src_indices.tolist(), pairs.tgt_indices.tolist()
    columns = {
        "score": pairs.scores.tolist(),
        "src_index": src_indices,
        "tgt_index": tgt_indices,
        "src": _text_column(src_texts, src_indices),
        "tgt": _text_column(tgt_texts, tgt_indices),
    }
    doc_column = _doc_column(pairs.doc_ids)
    if doc_column is not None:
        columns["doc_id"] = doc_column
    # Each format's own score cells, made only for that format: millions of pairs make the formatting a cost.
    scores = [f"{score:.6f}" for score in columns["score"]] if fmt != "parquet" else None
    write_table(
        path,
        fmt,
        columns,
        cells={"score": scores} if fmt in ("tsv", "csv") else None,
        records={"score": [float(score) for score in scores]} if fmt == "jsonl" else None,  # TSV's rounded value
        types={"score": "float32", "src_index": "int64", "tgt_index": "int64", "src": "string", "tgt": "string"},
    )
    return Path(path)
