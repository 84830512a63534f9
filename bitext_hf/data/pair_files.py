"""The files a pair job writes (``bitext-hf mine``, ``score``; ``push`` reads them back): the pairs table, its
sidecar, and the threshold report beside it. They are formats, not engines: the mining engine returns arrays
(:class:`bitext_hf.mining.MinedPairs`), the jobs write them through these functions, and the dataset card reads them
through the same names, so writer and reader cannot disagree.

- **The pairs table**, TSV, CSV, JSON Lines or Parquet, always atomically (``-`` is stdout). Columns, in every
  format: ``score src_index tgt_index src tgt`` (0-based line numbers), then ``doc_id`` for document-level mining.
  The file appears complete or not at all (:func:`bitext_hf.io.atomic_output`). TSV is the plain ``cut``-able
  format: a sentence holding a tab or a line break cannot be written in it, and :func:`check_representable` says so
  (naming the file and line) before any encoding. CSV (RFC 4180 quoting, through the ``csv`` module), JSON Lines
  and Parquet hold any text.
- **The sidecar**, ``<pairs file>.meta.json``: the run's parameters, inputs, counts and command, which
  ``bitext-hf push --pairs`` shows in the dataset card. Its format is one dataclass, :class:`MiningRecord`: its
  fields are the sidecar's keys, in the order they are written (:data:`METADATA_KEYS`). The file is a JSON object of
  the fields that are not None, indented by 2, UTF-8, ending with a newline.
- **The threshold report** (``--threshold-report``): a histogram of every candidate pair's score with the threshold
  marked (``OUT.threshold.png``) and a Markdown sample of the pairs just above and just below it
  (``OUT.threshold.md``), so that a threshold can be picked by looking. matplotlib is imported when the figure is
  drawn, not with this module.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import logging
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from bitext_hf.errors import DataValidationError
from bitext_hf.io import OutputSet, figures
from bitext_hf.io.tables import TABLE_FORMATS, output_format, write_table

__all__ = [
    "FORMATS",
    "MAX_SIDECAR_BYTES",
    "METADATA_KEYS",
    "TSV_BREAKERS",
    "TSV_HEADER",
    "MiningRecord",
    "ScoredPairs",
    "check_representable",
    "check_tsv_cells",
    "metadata_path",
    "output_format",
    "printable",
    "threshold_figure",
    "threshold_report_paths",
    "threshold_sample",
    "threshold_sample_markdown",
    "write_pairs",
    "write_threshold_report",
]

logger = logging.getLogger("bitext_hf")


class ScoredPairs(Protocol):
    """What a pairs table is written from: :class:`bitext_hf.mining.MinedPairs` is one (the format knows no engine)."""

    scores: np.ndarray
    src_indices: np.ndarray
    tgt_indices: np.ndarray
    doc_ids: np.ndarray | None
    quality: np.ndarray | None  # the pair classifier's probability, written as the `quality` column when present


# ------------------------------------------------------------------------------------------------ the pairs table


TSV_HEADER = ("score", "src_index", "tgt_index", "src", "tgt")
FORMATS = TABLE_FORMATS
# Characters that end a TSV cell or row for the usual readers (cut, pandas, the csv module's excel-tab dialect), and
# how a message names each.
TSV_BREAKERS = {"\t": "a tab", "\n": "a line break", "\r": "a carriage return"}
# What a pairs table refused in TSV can be written as instead.
_PAIRS_INSTEAD = "write .csv, .jsonl or .parquet instead (or --format csv|jsonl|parquet)"


def check_tsv_cells(
    texts: Iterable[str], name: str | os.PathLike, *, instead: str = _PAIRS_INSTEAD, lines: Iterable[int] | None = None
) -> None:
    """Refuse the first of ``texts`` that a TSV cell cannot hold (a tab, a line break or a carriage return would
    shift or split the row), naming ``name``, the 1-based line and what the sentence holds, then ``instead`` (the
    formats that hold it). The one check of every TSV the package writes: the pairs table
    (:func:`check_representable`) and the alignment files (:mod:`bitext_hf.data.alignment_files`).

    Args:
        lines (iterable of int, optional): the 1-based line number of each text (default 1, 2, 3...): the input lines
            of rows taken out of order.

    Raises:
        DataValidationError: the first such sentence.
    """
    for number, text in zip(itertools.count(1) if lines is None else lines, texts):
        if "\t" in text or "\n" in text or "\r" in text:
            held = next(what for char, what in TSV_BREAKERS.items() if char in text)
            raise DataValidationError(
                f"{name}:{number}: the sentence contains {held}, which TSV output cannot hold; {instead}"
            )


def check_representable(texts: Sequence[str] | None, path_of_texts: str | os.PathLike, format: str) -> None:
    """Refuse sentences the output format cannot hold, naming ``path_of_texts`` and the 1-based line.

    Only TSV has such sentences (:func:`check_tsv_cells`).

    Raises:
        DataValidationError: the first such sentence.
    """
    if format == "tsv" and texts is not None:
        check_tsv_cells(texts, path_of_texts)


def _text_column(texts: Sequence[str] | None, indices: list[int]) -> list[str]:
    return [""] * len(indices) if texts is None else [texts[i] for i in indices]


def _doc_column(doc_ids: np.ndarray | None) -> list | None:
    if doc_ids is None:
        return None
    values = np.asarray(doc_ids).tolist()
    # Document ids read from a file are strings; ids given from Python may be ints (kept in JSON / Parquet).
    return values if all(isinstance(v, int | str) for v in values) else [str(v) for v in values]


def write_pairs(
    pairs: ScoredPairs,
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
        DataValidationError: in TSV, a sentence written that holds a tab or a line break, naming its input line
            (:func:`check_tsv_cells`; only the rows written are checked).
    """
    fmt = output_format(path, format)
    src_indices, tgt_indices = pairs.src_indices.tolist(), pairs.tgt_indices.tolist()
    quality = getattr(pairs, "quality", None)
    columns = {
        "score": pairs.scores.tolist(),
        "src_index": src_indices,
        "tgt_index": tgt_indices,
        "src": _text_column(src_texts, src_indices),
        "tgt": _text_column(tgt_texts, tgt_indices),
    }
    if fmt == "tsv":  # the sentences written, not every input line (the jobs refuse those before encoding)
        for name, side, indices in (("source texts", "src", src_indices), ("target texts", "tgt", tgt_indices)):
            check_tsv_cells(columns[side], name, lines=(index + 1 for index in indices))
    doc_column = _doc_column(pairs.doc_ids)
    if doc_column is not None:
        columns["doc_id"] = doc_column
    if quality is not None:  # last: the columns of earlier releases keep their places (`cut -f4,5` still works)
        columns["quality"] = quality.tolist()
    # Each format's own score cells, made only for that format: millions of pairs make the formatting a cost.
    rounded = {name: [f"{value:.6f}" for value in columns[name]] for name in ("score", "quality") if name in columns}
    rounded = rounded if fmt != "parquet" else {}
    write_table(
        path,
        fmt,
        columns,
        cells=rounded if fmt in ("tsv", "csv") else None,
        # TSV's rounded values
        records={name: [float(value) for value in cells] for name, cells in rounded.items()}
        if fmt == "jsonl"
        else None,
        types={
            "score": "float32",
            "quality": "float32",
            "src_index": "int64",
            "tgt_index": "int64",
            "src": "string",
            "tgt": "string",
        },
    )
    return Path(path)


# ---------------------------------------------------------------------------------------------------- the sidecar


@dataclasses.dataclass
class MiningRecord:
    """What the sidecar says about one mining run (every field optional; None is left out of the file).

    Args:
        encoder (str, optional): the encoder of both sides; when the sides differ, ``src_model`` and ``tgt_model``.
        margin, mode, k, threshold: the scoring and retrieval settings.
        index (str, optional): the neighbour search ("exact", or the factory string and nprobe an index used).
        src, tgt (str, optional): the input files as messages name them.
        src_lang, tgt_lang (str, optional): language codes, for the dataset card.
        src_sentences, tgt_sentences (int, optional): rows searched on each side.
        command (str, optional): the command that reproduces the run (the card quotes it).
        filters (dict, optional): the filters that ran, ``{"settings": {...}, "removed": {name: count}}``
            (:mod:`bitext_hf.mining.filters`).
        classifier (str, optional): the pair classifier of the ``quality`` column.
        min_precision (float, optional): the estimated precision asked for (``--min-precision``): ``threshold`` is
            the one chosen for it.
        estimated_precision (float, optional): the mean quality of the pairs written (their estimated precision).
        review (dict, optional): what a review in ``bitext-hf app`` kept of the pairs it was given: ``pairs``,
            ``kept``, ``rejected`` (by hand) and the ``filters`` it set (:mod:`bitext_hf.app.review`).
    """

    encoder: str | None = None
    src_model: str | None = None
    tgt_model: str | None = None
    margin: str | None = None
    mode: str | None = None
    k: int | None = None
    threshold: float | None = None
    index: str | None = None
    src: str | None = None
    tgt: str | None = None
    src_lang: str | None = None
    tgt_lang: str | None = None
    src_sentences: int | None = None
    tgt_sentences: int | None = None
    command: str | None = None
    filters: dict[str, Any] | None = None
    classifier: str | None = None
    min_precision: float | None = None
    estimated_precision: float | None = None
    review: dict[str, Any] | None = None

    def to_json(self) -> str:
        """The sidecar's text, ready to write (serializing first lets a run write pairs and sidecar together)."""
        record = {key: printable(value) for key, value in dataclasses.asdict(self).items() if value is not None}
        return json.dumps(record, indent=2, ensure_ascii=False) + "\n"

    @classmethod
    def from_mapping(cls, metadata: Mapping[str, Any]) -> MiningRecord:
        """The record of ``metadata``'s keys; a key that is not a field is a ``ValueError`` naming the known ones."""
        unknown = sorted(set(metadata) - set(METADATA_KEYS))
        if unknown:
            raise ValueError(f"unknown mining metadata keys {unknown}; known: {', '.join(METADATA_KEYS)}")
        return cls(**metadata)


METADATA_KEYS = tuple(field.name for field in dataclasses.fields(MiningRecord))
# A sidecar is a few settings, counts and the command line, which Linux caps at 2 MiB (ARG_MAX); anything larger
# is not one that mine wrote.
MAX_SIDECAR_BYTES = 4 << 20


def metadata_path(pairs_path: str | os.PathLike) -> Path:
    """The sidecar of a pairs file: ``pairs.parquet`` -> ``pairs.parquet.meta.json``."""
    path = Path(pairs_path)
    return path.with_name(path.name + ".meta.json")


def threshold_report_paths(pairs_path: str | os.PathLike) -> tuple[Path, Path]:
    """The threshold report of a pairs file (``--threshold-report``): the score figure and the sample of pairs around
    the threshold, ``pairs.tsv.threshold.png`` and ``pairs.tsv.threshold.md``."""
    path = Path(pairs_path)
    return path.with_name(path.name + ".threshold.png"), path.with_name(path.name + ".threshold.md")


def printable(value: Any) -> Any:
    """``value`` with every string valid UTF-8: a file name that is not (``os.fsdecode`` keeps its bytes as lone
    surrogates) is written with its bytes escaped, ``en\\xff.txt``, instead of failing the write."""
    if isinstance(value, str):
        return value.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    return value


# -------------------------------------------------------------------------------------------- the threshold report


def threshold_sample(
    scores: np.ndarray, threshold: float | None, *, size: int = 10
) -> tuple[np.ndarray, np.ndarray, float]:
    """The positions of the ``size`` scores just at or above the threshold and of the ``size`` just below it (each in
    decreasing score order), and the threshold used: the median score when none was given."""
    scores = np.asarray(scores, dtype=np.float64)
    pivot = float(np.median(scores)) if threshold is None and scores.size else float(threshold or 0.0)
    order = np.argsort(-scores, kind="stable")
    above = order[scores[order] >= pivot]
    below = order[scores[order] < pivot]
    return above[-size:], below[:size], pivot


def _cell(text: str, width: int = 80) -> str:
    text = " ".join(text.split()).replace("|", "\\|")
    return text if len(text) <= width else text[: width - 1] + "…"


def threshold_sample_markdown(
    scores: np.ndarray,
    src_indices: np.ndarray,
    tgt_indices: np.ndarray,
    src_texts: Sequence[str] | None,
    tgt_texts: Sequence[str] | None,
    threshold: float | None,
    *,
    size: int = 10,
) -> str:
    """Markdown tables of the pairs just above and just below the threshold (the median without one): what a
    threshold keeps and drops at its edge. Line numbers are the inputs' (0-based)."""
    above, below, pivot = threshold_sample(scores, threshold, size=size)
    what = f"the threshold {pivot:g}" if threshold is not None else f"the median score {pivot:.4f} (no threshold)"
    parts = [f"Pairs just above and just below {what}, out of {len(scores)} candidates.\n"]
    titles = ("Just above (kept)", "Just below (dropped)") if threshold is not None else ("Just above", "Just below")
    for title, positions in zip(titles, (above, below)):
        parts.append(f"\n#### {title}\n\n| score | src | tgt | source | target |\n|---|---|---|---|---|\n")
        for position in positions.tolist():
            src, tgt = int(src_indices[position]), int(tgt_indices[position])
            source = _cell(src_texts[src]) if src_texts is not None else ""
            target = _cell(tgt_texts[tgt]) if tgt_texts is not None else ""
            parts.append(f"| {scores[position]:.4f} | {src} | {tgt} | {source} | {target} |\n")
        if not len(positions):
            parts.append("| | | | (none) | |\n")
    return "".join(parts)


def threshold_figure(
    scores: Sequence[float] | np.ndarray,
    *,
    threshold: float | None = None,
    margin: str = "ratio",
    quality: Sequence[float] | np.ndarray | None = None,
) -> tuple[Any, str]:
    """A histogram of every candidate pair of a run, before its threshold, the threshold marked: where it cuts the
    distribution (a run of translations shows a mode of high scores apart from the bulk of chance pairs); with the
    pairs' ``quality``, the estimated precision of the pairs at or above each score on a second axis. Returns the
    matplotlib figure and its caption."""
    values = np.asarray(scores, dtype=np.float64)
    if values.size == 0:
        raise ValueError("threshold_figure needs at least one score")
    bins = figures.histogram_bins(values, threshold=threshold)
    figure = figures.new_figure()
    axes = figure.add_subplot()
    if threshold is None:
        axes.hist(values, bins=bins, color=figures.PRIMARY_COLOUR, alpha=0.8, label=f"candidates (n={values.size})")
    else:
        kept = values >= threshold
        axes.hist(
            values[kept], bins=bins, color=figures.PRIMARY_COLOUR, alpha=0.8, label=f"kept (n={int(kept.sum())})"
        )
        axes.hist(
            values[~kept],
            bins=bins,
            color=figures.SECONDARY_COLOUR,
            alpha=0.8,
            label=f"below (n={int((~kept).sum())})",
        )
    figures.mark_threshold(axes, threshold)
    axes.set_xlabel(f"margin score ({margin} margin)")
    axes.set_ylabel("candidate pairs (count)")
    from matplotlib.ticker import MaxNLocator

    axes.yaxis.set_major_locator(MaxNLocator(integer=True))
    axes.set_title("Scores of the candidate pairs, before the threshold")
    handles, labels = axes.get_legend_handles_labels()
    caption = f"Scores of the {values.size} candidate pairs of the run ({margin} margin), before the threshold"
    if quality is not None:
        order = np.argsort(-values, kind="stable")
        precision = np.cumsum(np.asarray(quality, dtype=np.float64)[order]) / np.arange(1, values.size + 1)
        right = axes.twinx()
        (line,) = right.plot(values[order], precision, color="black", linewidth=1.5)
        right.set_ylim(0, 1.02)
        right.set_ylabel("estimated precision of the pairs >= score")
        handles.append(line)
        labels.append("estimated precision (mean quality)")
        caption += "; the line is the estimated precision (mean quality) of the pairs at or above each score"
    axes.legend(handles, labels, loc="upper left")
    if threshold is not None:
        share = 100 * float(np.mean(values >= threshold))
        caption += f"; the threshold {threshold:g} keeps {share:.1f}% of them"
    return figure, caption + "."


def precision_table(rows: Sequence[tuple[float, int, float, float]], threshold: float | None) -> str:
    """The Markdown table of ``rows`` (threshold, pairs at or above it, estimated precision, expected correct pairs:
    :func:`bitext_hf.mining.quality.precision_at_thresholds`), the run's ``threshold`` marked."""
    lines = [
        "| threshold | pairs at or above | estimated precision | expected correct pairs |",
        "|---|---|---|---|",
    ]
    for value, kept, precision, expected in rows:
        mark = " (the run's)" if threshold is not None and value == threshold else ""
        lines.append(f"| {value:.4f}{mark} | {kept} | {precision:.3f} | {expected:.0f} |")
    return "\n".join(lines)


def write_threshold_report(
    outputs: OutputSet,
    out: str | os.PathLike,
    candidates: ScoredPairs,
    src_texts: Sequence[str] | None,
    tgt_texts: Sequence[str] | None,
    *,
    threshold: float | None = None,
    margin: str = "ratio",
    size: int = 10,
    precision_rows: Sequence[tuple[float, int, float, float]] | None = None,
) -> tuple[Path, Path] | None:
    """Write the threshold report of the pairs file ``out`` beside it (``mine`` / ``score --threshold-report``):
    :func:`threshold_figure` of the ``candidates`` (``MinedPairs`` before the threshold) and a Markdown sample of
    the pairs just above and just below the threshold (``out.threshold.png``, ``out.threshold.md``), each to its
    temporary file in ``outputs`` (where the job declared both, before its work), committed with the job's other
    outputs. With the candidates' ``quality``, the figure draws the estimated precision against the score, and
    ``precision_rows`` (:func:`bitext_hf.mining.quality.precision_at_thresholds`) become a table of the sample.

    Returns:
        The paths of the figure and of the sample; None (with a warning) when there is no candidate to draw.
    """
    if not len(candidates.scores):
        logger.warning("--threshold-report: no candidate pairs, nothing to draw")
        return None
    figure_path, sample_path = threshold_report_paths(out)
    quality = getattr(candidates, "quality", None)
    figure, caption = threshold_figure(candidates.scores, threshold=threshold, margin=margin, quality=quality)
    with outputs.open(figure_path, "wb") as handle:
        figure.savefig(handle, format="png", dpi=figures.DPI)
    sample = threshold_sample_markdown(
        candidates.scores,
        candidates.src_indices,
        candidates.tgt_indices,
        src_texts,
        tgt_texts,
        threshold,
        size=size,
    )
    if precision_rows:
        table = precision_table(precision_rows, threshold)
        sample = (
            "Estimated precision (the mean quality of the pairs at or above the threshold) and expected number of "
            f"correct pairs (the sum of their quality):\n\n{table}\n\n{sample}"
        )
    with outputs.open(sample_path) as handle:
        handle.write(f"{caption}\n\n![threshold]({figure_path.name})\n\n{sample}")
    return figure_path, sample_path
