"""The files of a sentence alignment (``bitext-hf align``), written by the align job and read by the dataset card and
the alignment metric: a format, not the engine (:mod:`bitext_hf.alignment` returns beads and scores).

``vecalign`` (the format vecalign's and Bertalign's scorers read): one bead a line, ``[0, 1]:[2]:0.734215``, the
0-based source and target sentences then the score; every sentence of both documents appears once, in order. ``tsv``,
``jsonl`` and ``parquet`` hold the same beads with their joined sentences: columns ``score src_lines tgt_lines src
tgt`` (TSV: the lines comma-separated, empty for none; JSON Lines and Parquet: lists of integers), and with a pair
classifier (``align --classifier``) a last column ``quality``, each bead's probability of being a translation (0.0
for a 1-0 or 0-1 bead). Every file is written atomically (:func:`bitext_hf.io.atomic_output`).
"""

from __future__ import annotations

import os
from ast import literal_eval
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

import numpy as np

from bitext_hf.data.pair_files import check_tsv_cells
from bitext_hf.errors import DataValidationError, UsageError
from bitext_hf.io import atomic_output
from bitext_hf.io.tables import write_table

__all__ = [
    "ALIGNMENT_TASK",
    "ALIGN_FORMATS",
    "EXTENSIONS",
    "SIDECAR_KEYS",
    "SIDECAR_NAME",
    "Beads",
    "alignment_format",
    "read_beads",
    "read_scored_beads",
    "write_alignment",
]

# The sidecar of a folder of outputs (a file output's is <file>.meta.json, as mine's).
SIDECAR_NAME = "alignment.meta.json"
# What tells an alignment's sidecar from a mining run's (``push --pairs`` renders the card of either), and its keys.
ALIGNMENT_TASK = "sentence alignment"
SIDECAR_KEYS = (
    "task",
    "encoder",
    # The search's settings (bitext_hf.alignment.AlignSettings, whose fields a test holds these to).
    "max_align",
    "top_k",
    "window",
    "anchor_window",
    "skip",
    "margin",
    "length_prior",
    "overlaps",
    "format",
    "classifier",
    "src",
    "tgt",
    "src_lang",
    "tgt_lang",
    "split",
    "clauses",
    "src_docs",
    "tgt_docs",
    "documents",
    "command",
)
ALIGN_FORMATS = ("vecalign", "tsv", "jsonl", "parquet", "tmx")
EXTENSIONS = {"vecalign": ".align", "tsv": ".tsv", "jsonl": ".jsonl", "parquet": ".parquet", "tmx": ".tmx"}
_BY_EXTENSION = {".tsv": "tsv", ".jsonl": "jsonl", ".parquet": "parquet", ".pq": "parquet", ".tmx": "tmx"}
HEADER = ("score", "src_lines", "tgt_lines", "src", "tgt")
# The column a pair classifier adds, last.
QUALITY = "quality"
# The joined text of a bead: the sentences as the encoder read them, one space between.
_JOINER = " "


class Beads(Protocol):
    """What an alignment file is written from: :class:`bitext_hf.alignment.Alignment` is one."""

    beads: Sequence[tuple[list[int], list[int]]]
    scores: np.ndarray


def alignment_format(path: str | os.PathLike | None, format: str | None = None) -> str:
    """``format`` when given, else from the extension (.tsv, .jsonl, .parquet); anything else is vecalign."""
    if format is not None:
        if format not in ALIGN_FORMATS:
            raise UsageError(f"unknown alignment format {format!r}; choose one of {', '.join(ALIGN_FORMATS)}")
        return format
    return _BY_EXTENSION.get(Path(os.fspath(path or "")).suffix.lower(), "vecalign")


def check_tsv_sentences(sentences: Sequence[str], name: str, lines: Sequence[int] | None = None) -> None:
    """TSV cannot hold a sentence with a tab, a line break or a carriage return: refused naming the file, the line and
    what it holds, before any encoding (:func:`bitext_hf.data.pair_files.check_tsv_cells`, the pairs table's check).
    ``lines``: each sentence's line, for split text (default: one sentence a line)."""
    check_tsv_cells(
        sentences,
        name,
        instead="write .jsonl, .parquet or .tmx instead (or --format vecalign|jsonl|parquet|tmx)",
        lines=lines,
    )


def _rows(alignment: Beads, src: Sequence[str], tgt: Sequence[str]):
    for (xs, ys), score in zip(alignment.beads, alignment.scores.tolist()):
        yield score, xs, ys, _JOINER.join(src[x] for x in xs), _JOINER.join(tgt[y] for y in ys)


def write_alignment(
    alignment: Beads,
    path: str | os.PathLike,
    src: Sequence[str],
    tgt: Sequence[str],
    format: str,
    quality: Sequence[float] | np.ndarray | None = None,
    languages: tuple[str, str] | None = None,
) -> None:
    """Write ``alignment`` of the sentences ``src`` and ``tgt`` to ``path`` (``-``: stdout) in ``format``; with
    ``quality`` (one value per bead), a last column ``quality`` (tsv, jsonl, parquet; in tmx a property of each unit:
    vecalign has no place for it). ``languages`` (source, target): the tmx format's, which it needs."""
    if quality is not None:
        quality = np.asarray(quality, dtype=np.float64).reshape(-1)
        if format == "vecalign":
            raise UsageError("the vecalign format has no place for a quality column: write tsv, jsonl or parquet")
        if quality.shape[0] != len(alignment.beads):
            raise ValueError(f"{quality.shape[0]} quality values for {len(alignment.beads)} beads")
    if format == "tmx":
        from bitext_hf.data.tmx import write_tmx

        if languages is None:
            raise UsageError("the tmx format names the languages of both sides: give languages=(source, target)")
        links = [number for number, (xs, ys) in enumerate(alignment.beads) if xs and ys]
        rows = list(_rows(alignment, src, tgt))
        properties = {"score": [rows[number][0] for number in links]}
        if quality is not None:
            properties[QUALITY] = [float(quality[number]) for number in links]
        write_tmx(
            path,
            [rows[number][3] for number in links],
            [rows[number][4] for number in links],
            *languages,
            properties,
        )
    elif format == "vecalign":
        with atomic_output(path) as handle:
            for (xs, ys), score in zip(alignment.beads, alignment.scores.tolist()):
                handle.write(f"{xs}:{ys}:{score:.6f}\n")
    elif format in ("parquet", "jsonl", "tsv"):
        rows = list(_rows(alignment, src, tgt))
        columns = dict(zip(HEADER, map(list, zip(*rows)))) if rows else {name: [] for name in HEADER}
        cells = {
            "score": [f"{score:.6f}" for score in columns["score"]],
            **{name: [",".join(map(str, lines)) for lines in columns[name]] for name in HEADER[1:3]},
        }
        records = {"score": [round(score, 6) for score in columns["score"]]}
        types = dict(zip(HEADER, ("float32", "list<int64>", "list<int64>", "string", "string")))
        if quality is not None:
            columns[QUALITY] = quality.tolist()
            cells[QUALITY] = [f"{value:.6f}" for value in columns[QUALITY]]
            records[QUALITY] = [round(value, 6) for value in columns[QUALITY]]
            types[QUALITY] = "float32"
        write_table(
            path,
            format,
            columns,
            cells=cells if format == "tsv" else None,
            records=records if format == "jsonl" else None,
            types=types,
        )
    else:
        raise UsageError(f"unknown alignment format {format!r}; choose one of {', '.join(ALIGN_FORMATS)}")


def read_beads(path: str | os.PathLike) -> list[tuple[list[int], list[int]]]:
    """The beads of a vecalign-format file (``[0]:[0, 1]`` or with a score after a second colon), as vecalign's
    ``read_alignments`` reads them; a line that is not one is a data error naming the file and line."""
    return read_scored_beads(path)[0]


def read_scored_beads(path: str | os.PathLike) -> tuple[list[tuple[list[int], list[int]]], list[float]]:
    """The beads of a vecalign-format file and their scores (NaN where a line has none); see :func:`read_beads`."""
    from bitext_hf.data import read_lines

    beads, scores = [], []
    for number, line in enumerate(read_lines(path, allow_empty_lines=True), start=1):
        if not line.strip():
            continue
        fields = [field.strip() for field in line.split(":") if field.strip()]
        try:
            xs, ys = literal_eval(fields[0]), literal_eval(fields[1])
            if not all(isinstance(side, list) and all(type(i) is int and i >= 0 for i in side) for side in (xs, ys)):
                raise ValueError
            score = float(fields[2]) if len(fields) > 2 else float("nan")
        except (ValueError, SyntaxError, IndexError, MemoryError, RecursionError):
            raise DataValidationError(
                f"{path}:{number}: expected a bead `[i, j]:[k]` or `[i, j]:[k]:score` (0-based sentence numbers)"
            ) from None
        beads.append((xs, ys))
        scores.append(score)
    return beads, scores
