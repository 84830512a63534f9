"""Writing mined pairs: TSV (header ``score src_index tgt_index src tgt``) or Parquet, always atomically.

The file appears complete or not at all: it is written to a temporary file in the same folder and renamed into
place, so an interrupted run never leaves a truncated output behind.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from bitext_hf.io import atomic_output
from bitext_hf.mining.retrieval import MinedPairs

__all__ = ["TSV_HEADER", "output_format", "write_pairs"]

TSV_HEADER = ("score", "src_index", "tgt_index", "src", "tgt")


def output_format(path: str | os.PathLike) -> str:
    """ "parquet" for ``.parquet`` / ``.pq``, else "tsv"."""
    return "parquet" if Path(path).suffix.lower() in (".parquet", ".pq") else "tsv"


def _text_column(texts: Sequence[str] | None, indices: list[int]) -> list[str]:
    return [""] * len(indices) if texts is None else [texts[i] for i in indices]


def write_pairs(
    pairs: MinedPairs,
    path: str | os.PathLike,
    *,
    src_texts: Sequence[str] | None = None,
    tgt_texts: Sequence[str] | None = None,
    format: str | None = None,
) -> Path:
    """Write ``pairs`` with their sentences (empty when texts are not given) to ``path``.

    Raises:
        ValueError: in TSV, a sentence containing a tab or a newline (it would corrupt the columns; use Parquet).
    """
    fmt = format or output_format(path)
    src_indices, tgt_indices = pairs.src_indices.tolist(), pairs.tgt_indices.tolist()
    src_column = _text_column(src_texts, src_indices)
    tgt_column = _text_column(tgt_texts, tgt_indices)
    if fmt == "parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        table = pa.table(
            {
                "score": pa.array(pairs.scores, pa.float32()),
                "src_index": pa.array(pairs.src_indices, pa.int64()),
                "tgt_index": pa.array(pairs.tgt_indices, pa.int64()),
                "src": pa.array(src_column, pa.string()),
                "tgt": pa.array(tgt_column, pa.string()),
            }
        )
        with atomic_output(path, "wb") as handle:
            pq.write_table(table, handle)
        return Path(path)
    if fmt != "tsv":
        raise ValueError(f"unknown output format {fmt!r}; use 'tsv' or 'parquet'")
    for side, column, indices in (("source", src_column, src_indices), ("target", tgt_column, tgt_indices)):
        for text, index in zip(column, indices):
            if "\t" in text or "\n" in text or "\r" in text:
                raise ValueError(
                    f"{side} sentence {index} contains a tab or line break, which TSV cannot hold; "
                    "write Parquet instead (--out pairs.parquet)"
                )
    with atomic_output(path) as handle:
        handle.write("\t".join(TSV_HEADER) + "\n")
        for score, src, tgt, src_text, tgt_text in zip(
            pairs.scores.tolist(), src_indices, tgt_indices, src_column, tgt_column
        ):
            handle.write(f"{score:.6f}\t{src}\t{tgt}\t{src_text}\t{tgt_text}\n")
    return Path(path)
