"""What the review app shows and keeps, without Gradio: a pairs file (``mine``, ``score`` or ``align`` output) held as
columns, the filters a reviewer sets, the pairs they reject, and the export of what is left.

Everything the browser sees is a page of rows: the columns stay here (numpy and Arrow, not a DataFrame sent to the
page), so a million pairs filter, sort and page in milliseconds and the browser holds one page.

The review's decisions (the filters and the rejected rows) live in a file beside the input,
``<pairs file>.review.json``, never in the input: written atomically on every change, read back when the app opens
the same input again (its size and SHA-256 recorded, so decisions are never applied to another file's rows).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import math
import os
import re
import sys
import threading
import unicodedata
from collections.abc import Callable, Sequence
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from bitext_hf.errors import DataValidationError, UsageError
from bitext_hf.hub.dataset_card import read_pairs_table
from bitext_hf.io import atomic_output, iter_input_chunks, read_input_bytes
from bitext_hf.io.outputs import non_regular_kind
from bitext_hf.io.tables import output_format
from bitext_hf.io.terminal import escape_controls
from bitext_hf.mining.filters import SCRIPT_WEIGHTS
from bitext_hf.mining.quality import precision_at_thresholds

__all__ = [
    "DECISIONS_VERSION",
    "SORTS",
    "PairsReview",
    "ReviewFilters",
    "decisions_path",
    "file_fingerprint",
    "latin_equivalent_lengths",
    "one_at_a_time",
    "read_decisions",
    "reviewed_path",
    "write_decisions",
]

DECISIONS_VERSION = 1
MAX_DECISIONS_BYTES = 64 << 20  # a rejected row is a few bytes: a million of them fit
LID_PART = 10_000  # texts a part of language identification: one step of its progress bar
SORTS = (
    "score, highest first",
    "score, lowest first",
    "quality, lowest first",
    "quality, highest first",
    "file order",
)


def one_at_a_time(method):
    """A review's method run under the review's lock: the app's events run in Gradio's worker threads, and two tabs
    (or a slider and a button) may call one review at once; an edit is never seen half made."""

    @functools.wraps(method)
    def locked(self, *args, **kwargs):
        with self._lock:
            return method(self, *args, **kwargs)

    return locked


def decisions_path(pairs_path: str | os.PathLike) -> Path:
    """Where a review of ``pairs_path`` keeps its decisions: ``pairs.tsv`` -> ``pairs.tsv.review.json``."""
    path = Path(pairs_path)
    return path.with_name(path.name + ".review.json")


def reviewed_path(pairs_path: str | os.PathLike, format: str | None = None) -> Path:
    """The default export of a review: ``pairs.tsv`` -> ``pairs.reviewed.tsv`` (``format`` changes the extension)."""
    path = Path(pairs_path)
    suffix = f".{format}" if format else path.suffix
    return path.with_name(f"{path.stem}.reviewed{suffix}")


@cache
def _weighted_scripts() -> dict[float, re.Pattern]:
    """A character class per weight of :data:`~bitext_hf.mining.filters.SCRIPT_WEIGHTS`, made from the Unicode names
    the filters read (every code point, once: about a second), so that Arrow counts them in C."""
    ranges: dict[float, list[list[int]]] = {}
    for point in range(sys.maxunicode + 1):
        weight = SCRIPT_WEIGHTS.get(unicodedata.name(chr(point), "").split(" ", 1)[0])
        if weight is None:
            continue
        spans = ranges.setdefault(weight, [])
        if spans and spans[-1][1] == point - 1:
            spans[-1][1] = point
        else:
            spans.append([point, point])
    return {
        weight: "[" + "".join(f"\\x{{{a:x}}}-\\x{{{b:x}}}" for a, b in spans) + "]" for weight, spans in ranges.items()
    }


def read_decisions(path: Path) -> dict[str, Any] | None:
    """A review's decisions file (a JSON object of :data:`DECISIONS_VERSION`), or None when there is none; read
    bounded, never through a link or from a FIFO.

    Raises:
        DataValidationError: something there that is not a regular file, not JSON, or not of this version (the file
            is left as it is).
    """
    shown = escape_controls(str(path))
    kind = non_regular_kind(path, named=True)
    if kind is not None:
        raise DataValidationError(f"{shown}: is {kind}, not a review's decisions file")
    if not path.exists():
        return None
    try:
        saved = json.loads(read_input_bytes(path, max_bytes=MAX_DECISIONS_BYTES))
    except (ValueError, UnicodeDecodeError, RecursionError) as error:
        raise DataValidationError(
            f"{shown}: not a review's decisions file ({escape_controls(str(error))}); move it away to start over"
        ) from None
    if not isinstance(saved, dict) or saved.get("version") != DECISIONS_VERSION:
        raise DataValidationError(f"{shown}: not a decisions file of this version ({DECISIONS_VERSION})")
    return saved


def write_decisions(path: Path, record: dict[str, Any]) -> None:
    """Write a review's decisions (``record`` and the version), atomically; a link, a FIFO or a folder at ``path`` is
    refused, never followed."""
    with atomic_output(path, follow_symlinks=False) as handle:
        json.dump({"version": DECISIONS_VERSION, **record}, handle, ensure_ascii=False)
        handle.write("\n")


def latin_equivalent_lengths(texts: Any) -> np.ndarray:
    """:func:`bitext_hf.mining.filters.weighted_length` of each text of an Arrow string array, computed by Arrow
    (the filters' per-character Python loop takes about a minute on a million pairs; this, a second)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    texts = pc.utf8_trim_whitespace(pa.chunked_array([texts]) if isinstance(texts, pa.Array) else texts)
    lengths = pc.utf8_length(texts).to_numpy(zero_copy_only=False).astype(np.float64)
    for weight, pattern in _weighted_scripts().items():
        lengths += (weight - 1.0) * pc.count_substring_regex(texts, pattern).to_numpy(zero_copy_only=False)
    return lengths


@dataclasses.dataclass
class ReviewFilters:
    """What a reviewer keeps: pairs whose score is at least ``threshold``, whose ``quality`` (when the file has it) is
    at least ``min_quality``, whose longer side is at most ``max_length_ratio`` times the shorter (Latin-equivalent
    characters, as ``--max-length-ratio``), whose sides are in the languages fastText's lid.176 finds (``lid``, with
    ``src_lang`` / ``tgt_lang``), and that were not rejected. None: no limit. ``search`` and ``sort`` change what the
    page shows, not what is kept."""

    threshold: float | None = None
    min_quality: float | None = None
    max_length_ratio: float | None = None
    lid: bool = False
    src_lang: str | None = None
    tgt_lang: str | None = None
    search: str = ""
    sort: str = SORTS[0]

    def __post_init__(self):
        for name in ("threshold", "min_quality", "max_length_ratio"):
            value = getattr(self, name)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
                raise UsageError(f"{name} must be a finite number or None, not {value!r}")
            setattr(self, name, float(value))
        if self.max_length_ratio is not None and self.max_length_ratio < 1:
            raise UsageError(f"max_length_ratio must be at least 1, not {self.max_length_ratio}")
        if not isinstance(self.lid, bool):
            raise UsageError(f"lid must be True or False, not {self.lid!r}")
        for name in ("src_lang", "tgt_lang"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, str):
                raise UsageError(f"{name} must be a language code or None, not {value!r}")
            setattr(self, name, value.strip() or None if value else None)
        if not isinstance(self.search, str):
            raise UsageError(f"search must be text, not {self.search!r}")
        if self.sort not in SORTS:
            raise UsageError(f"sort must be one of {', '.join(SORTS)}; not {self.sort!r}")


class PairsReview:
    """A review of one pairs file: read it (bounded, checked: :func:`bitext_hf.hub.dataset_card.read_pairs_table`),
    restore the decisions beside it, and answer what the app asks: a page, the counts and the estimated precision of
    what the filters keep, the histogram; reject and restore rows; export.

    Raises:
        DataValidationError: the pairs cannot be read (the file named), or the decisions file beside them is not one
            this review wrote for this file (it is left as it is: move it away to start over).
    """

    def __init__(self, path: str | os.PathLike):
        if not isinstance(path, str | os.PathLike) or not os.fspath(path):
            raise UsageError(f"PairsReview takes the path of a pairs file, not {path!r}")
        self.path = Path(path)
        self._lock = threading.RLock()
        self.shown = escape_controls(os.fspath(self.path))
        # The languages of the pairs, when the input says them (a TMX header): a TMX export names them.
        self.languages: tuple[str, str] | None = None
        if self.path.suffix.lower() == ".tmx":
            self.table, self.languages = _tmx_table(self.path)
        else:
            self.table = read_pairs_table(self.path)
        _check_text_columns(self.table, self.shown)
        self.fingerprint = file_fingerprint(self.path)
        self.scores = self.table.column("score").to_numpy().astype(np.float64)
        self.quality = (
            self.table.column("quality").to_numpy().astype(np.float64)
            if "quality" in self.table.column_names
            else None
        )
        self.count = self.table.num_rows
        self.rejected = np.zeros(self.count, dtype=bool)
        self.filters = ReviewFilters()
        self._ratios: np.ndarray | None = None
        self._languages: dict[tuple[str | None, str | None], np.ndarray] = {}
        self._orders: dict[str, np.ndarray] = {}
        self._restore()

    # -- decisions ---------------------------------------------------------------------------------------------
    @property
    def decisions_path(self) -> Path:
        return decisions_path(self.path)

    def _restore(self) -> None:
        saved = read_decisions(self.decisions_path)
        if saved is None:
            return
        shown = escape_controls(str(self.decisions_path))
        if saved.get("input") != self.fingerprint:
            raise DataValidationError(
                f"{shown}: holds decisions about another version of {self.shown} (its size or SHA-256 differ); "
                "move it away to start over"
            )
        rows = saved.get("rejected")
        if not isinstance(rows, list) or not all(type(row) is int and 0 <= row < self.count for row in rows):
            raise DataValidationError(f"{shown}: 'rejected' must list row numbers from 0 to {self.count - 1}")
        try:
            filters = ReviewFilters(**saved.get("filters", {}))
        except (TypeError, UsageError) as error:
            raise DataValidationError(f"{shown}: its filters cannot be used ({error})") from error
        self.rejected[rows] = True
        self.filters = filters

    @one_at_a_time
    def save(self) -> None:
        """Write the decisions beside the input (:func:`write_decisions`)."""
        write_decisions(
            self.decisions_path,
            {
                "input": self.fingerprint,
                "filters": dataclasses.asdict(self.filters),
                "rejected": np.flatnonzero(self.rejected).tolist(),
            },
        )

    @one_at_a_time
    def set_filters(self, filters: ReviewFilters) -> None:
        if not isinstance(filters, ReviewFilters):
            raise UsageError(f"filters must be a ReviewFilters, not {type(filters).__name__}")
        self.filters = filters
        self.save()

    @one_at_a_time
    def reject(self, rows: Sequence[int], rejected: bool = True) -> None:
        """Reject ``rows`` (file order, 0-based), or restore them with ``rejected=False``; saved at once."""
        rows = list(rows)
        if not all(type(row) in (int, np.int64) and 0 <= row < self.count for row in rows):
            raise UsageError(f"rows must be row numbers from 0 to {self.count - 1}, not {rows!r}")
        self.rejected[rows] = rejected
        self.save()

    # -- what the filters keep ---------------------------------------------------------------------------------
    @property
    def length_ratios(self) -> np.ndarray:
        if self._ratios is None:
            src = latin_equivalent_lengths(self.table.column("src"))
            tgt = latin_equivalent_lengths(self.table.column("tgt"))
            self._ratios = np.maximum(src, tgt) / np.maximum(np.minimum(src, tgt), 1.0)
        return self._ratios

    @one_at_a_time
    def identify_languages(
        self, src_lang: str | None, tgt_lang: str | None, progress: Callable[[float], None] | None = None
    ) -> np.ndarray:
        """Which pairs have their sides in ``src_lang`` / ``tgt_lang`` (None: that side unchecked), by the filters'
        own rule and model (``mine --lid``: lid.176), computed once per pair of languages in parts of
        :data:`LID_PART` texts, ``progress`` told the share done after each (minutes on a million pairs:
        benchmarks/README.md, "The review app", so the page shows a bar)."""
        key = (src_lang, tgt_lang)
        if key not in self._languages:
            from bitext_hf.mining.filters import DEFAULT_LID_MIN_PROB, LanguageIdentifier

            identifier = LanguageIdentifier(DEFAULT_LID_MIN_PROB)
            keep = np.ones(self.count, dtype=bool)
            sides = [(column, lang) for column, lang in (("src", src_lang), ("tgt", tgt_lang)) if lang]
            parts = [(column, lang, start) for column, lang in sides for start in range(0, self.count, LID_PART)]
            for done, (column, lang, start) in enumerate(parts, start=1):
                texts = self.table.column(column).slice(start, LID_PART).to_pylist()
                keep[start : start + len(texts)] &= np.asarray(identifier.keeps(texts, lang), dtype=bool)
                if progress is not None:
                    progress(done / len(parts))
            self._languages[key] = keep
        return self._languages[key]

    @one_at_a_time
    def passing(self, filters: ReviewFilters | None = None) -> np.ndarray:
        """The rows the filters pass, rejections aside."""
        filters = filters or self.filters
        keep = np.ones(self.count, dtype=bool)
        if filters.threshold is not None:
            keep &= self.scores >= filters.threshold
        if filters.min_quality is not None and self.quality is not None:
            keep &= self.quality >= filters.min_quality
        if filters.max_length_ratio is not None:
            keep &= self.length_ratios <= filters.max_length_ratio
        if filters.lid and (filters.src_lang or filters.tgt_lang):
            keep &= self.identify_languages(filters.src_lang, filters.tgt_lang)
        return keep

    @one_at_a_time
    def kept(self, filters: ReviewFilters | None = None) -> np.ndarray:
        """The rows an export writes: passing the filters and not rejected."""
        return self.passing(filters) & ~self.rejected

    @one_at_a_time
    def summary(self, filters: ReviewFilters | None = None) -> dict[str, Any]:
        """Counts of what is kept, and with a ``quality`` column the estimated precision (mean quality) and the
        expected number of correct pairs (sum of quality) among them."""
        kept = self.kept(filters)
        facts: dict[str, Any] = {
            "pairs": self.count,
            "passing": int(self.passing(filters).sum()),
            "rejected": int(self.rejected.sum()),
            "kept": int(kept.sum()),
        }
        if self.quality is not None:
            # precision_at_thresholds' own definition, on the kept rows (a threshold of -inf keeps them all).
            _, _, precision, expected = precision_at_thresholds(self.scores[kept], self.quality[kept], [-np.inf])[0]
            facts["estimated_precision"] = precision
            facts["expected_correct"] = expected
        return facts

    def _order(self, sort: str) -> np.ndarray:
        if sort not in self._orders:
            if sort.startswith("quality") and self.quality is not None:
                values = self.quality
            elif sort == "file order" or sort.startswith("quality"):
                values = None
            else:
                values = self.scores
            if values is None:
                order = np.arange(self.count)
            else:
                # Stable: pairs with the same value keep their file order, whichever way the sort goes.
                order = np.argsort(-values if "highest" in sort else values, kind="stable")
            self._orders[sort] = order
        return self._orders[sort]

    @one_at_a_time
    def view(self, filters: ReviewFilters | None = None, *, show_rejected: bool = True) -> np.ndarray:
        """The rows the page lists, in the filters' sort order: those passing the filters (with the rejected ones
        unless ``show_rejected`` is False) that hold ``search`` in either side (case-insensitive)."""
        import pyarrow as pa
        import pyarrow.compute as pc

        filters = filters or self.filters
        shown = self.passing(filters)
        if not show_rejected:
            shown &= ~self.rejected
        if filters.search:
            needle = filters.search
            found = pc.or_(
                pc.match_substring(self.table.column("src"), needle, ignore_case=True),
                pc.match_substring(self.table.column("tgt"), needle, ignore_case=True),
            )
            shown &= pa.chunked_array(found).to_numpy(zero_copy_only=False).astype(bool)
        order = self._order(filters.sort)
        return order[shown[order]]

    @one_at_a_time
    def page(self, rows: np.ndarray, number: int, size: int = 50) -> list[dict[str, Any]]:
        """Page ``number`` (from 1) of ``rows``: each row's number, score, quality, sides and whether rejected."""
        if type(number) is not int or number < 1 or type(size) is not int or size < 1:
            raise UsageError(f"a page is a number from 1 and a size from 1, not {number!r} and {size!r}")
        chosen = rows[(number - 1) * size : number * size]
        taken = self.table.take(chosen)
        src, tgt = taken.column("src").to_pylist(), taken.column("tgt").to_pylist()
        return [
            {
                "row": int(row),
                "score": float(self.scores[row]),
                "quality": None if self.quality is None else float(self.quality[row]),
                "src": source,
                "tgt": target,
                "rejected": bool(self.rejected[row]),
            }
            for row, source, target in zip(chosen.tolist(), src, tgt)
        ]

    @one_at_a_time
    def histogram(
        self, bins: int = 40, filters: ReviewFilters | None = None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Equal-width bins of the scores: (edges, every pair's count, the kept pairs' count)."""
        finite = self.scores[np.isfinite(self.scores)]
        low, high = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
        edges = np.linspace(low, high if high > low else low + 1.0, bins + 1)
        every, _ = np.histogram(self.scores, edges)
        kept, _ = np.histogram(self.scores[self.kept(filters)], edges)
        return edges, every, kept

    # -- export ------------------------------------------------------------------------------------------------
    @one_at_a_time
    def export(self, out: str | os.PathLike | None = None, format: str | None = None) -> tuple[Path, int]:
        """Write the kept pairs (file order, every column of the input) to ``out`` (default
        :func:`reviewed_path`) and their sidecar beside it (``out.meta.json``: the input's, when it has one, with
        this review's counts and filters under ``review`` and the kept pairs' estimated precision), together: both
        or neither. Returns the path and the number of pairs written. In the input's own text format the kept lines
        are copied byte for byte (nothing re-formatted: scores keep their digits); another format is written from
        the columns. ``bitext-hf push --pairs OUT`` then publishes them with a card that tells the review.

        Raises:
            UsageError: ``out`` is the input or its decisions file, a link, a FIFO, a folder, or names no format.
            DataValidationError: the input changed since the review read it, or its sidecar cannot be read.
        """
        from bitext_hf.data.pair_files import metadata_path
        from bitext_hf.hub.dataset_card import read_sidecar_of
        from bitext_hf.io import OutputSet

        out = Path(out) if out is not None else reviewed_path(self.path, format)
        if format == "tmx" or (format is None and out.suffix.lower() == ".tmx"):
            format = "tmx"
        else:
            format = output_format(out, format)
        outputs = OutputSet(inputs=[self.path, self.decisions_path, metadata_path(self.path)], option="export")
        outputs.add(out)
        outputs.add(metadata_path(out), last=True)  # the sidecar vouches for the pairs: renamed after them
        sidecar = dict(read_sidecar_of(self.path))
        languages = self.languages or (sidecar.get("src_lang"), sidecar.get("tgt_lang"))
        if format == "tmx" and not all(languages):
            raise UsageError(
                f"export {escape_controls(str(out))}: a TMX file names both languages, and neither the pairs nor their "
                "sidecar (src_lang, tgt_lang) say them; export .tsv, .csv, .jsonl or .parquet"
            )
        kept = np.flatnonzero(self.kept())
        if file_fingerprint(self.path) != self.fingerprint:
            raise DataValidationError(f"{self.shown}: changed since the review read it; open it again")
        facts = self.summary()
        sidecar["review"] = {
            "pairs": self.count,
            "kept": int(kept.size),
            "rejected": facts["rejected"],
            "filters": {
                name: value
                for name, value in dataclasses.asdict(self.filters).items()
                if value not in (None, False, "") and name not in ("sort", "search")
            },
        }
        if "estimated_precision" in facts and kept.size:
            sidecar["estimated_precision"] = round(facts["estimated_precision"], 6)
        lines = self._lines() if format == _text_format(self.path) else None
        with outputs:
            if format == "tmx":
                with outputs.staged(out) as staged:
                    self._write_tmx(staged, kept, languages)
            else:
                with outputs.open(out, "wb") as handle:
                    if lines is not None:
                        header = 1 if format in ("tsv", "csv") else 0
                        handle.writelines(lines[:header])
                        handle.writelines(lines[header + row] for row in kept.tolist())
                    else:
                        _write_arrow(self.table.take(kept), format, handle, out)
            with outputs.open(metadata_path(out)) as handle:
                handle.write(json.dumps(sidecar, indent=2, ensure_ascii=False) + "\n")
            outputs.commit()
        return out, int(kept.size)

    def _write_tmx(self, path: str, kept: np.ndarray, languages: tuple[str, str]) -> None:
        from bitext_hf.data.tmx import check_xml_text, write_tmx

        taken = self.table.take(kept)
        sources, targets = taken.column("src").to_pylist(), taken.column("tgt").to_pylist()
        for texts in (sources, targets):
            # Where a row is in the file: a unit from 1, a line after a TSV or CSV header.
            first = 2 if _text_format(self.path) in ("tsv", "csv") else 1
            check_xml_text(texts, self.shown, lines=[row + first for row in kept.tolist()])
        numbers = {name: taken.column(name).to_pylist() for name in ("score", "quality") if name in taken.column_names}
        write_tmx(path, sources, targets, *languages, numbers)

    def _lines(self) -> list[bytes] | None:
        """The input's lines when they are its rows one for one (a header, then a row a line; a CSV cell quoting a
        line break, or a blank line in JSON Lines, break that: then None and the export is written from columns)."""
        data = read_input_bytes(self.path)
        lines = data.splitlines(keepends=True)
        if lines and not lines[-1].endswith(b"\n"):
            lines[-1] += b"\n"
        header = 1 if _text_format(self.path) in ("tsv", "csv") else 0
        if len(lines) != self.count + header or any(not line.strip() for line in lines):
            return None
        return lines


def _check_text_columns(table: Any, shown: str) -> None:
    """The two sides are text on every row: what the page shows, searches and measures (a JSON number or null there
    would reach Arrow's text functions)."""
    import pyarrow as pa

    for name in ("src", "tgt"):
        column = table.column(name)
        if not (pa.types.is_string(column.type) or pa.types.is_large_string(column.type)):
            raise DataValidationError(f"{shown}: the {name} column holds {column.type} values, not text")
        if column.null_count:
            row = column.to_pylist().index(None) + 1
            raise DataValidationError(f"{shown}: row {row}: no {name} text (null)")


def _tmx_table(path: Path) -> tuple[Any, tuple[str, str]]:
    """A TMX file's pairs as the columns of a pairs file (``score`` from each unit's ``x-score``, ``quality`` from
    ``x-quality`` when it has one) and its two languages."""
    import pyarrow as pa

    from bitext_hf.data.tmx import read_tmx
    from bitext_hf.io import max_input_bytes

    shown = escape_controls(os.fspath(path))
    memory = read_tmx(path, max_bytes=max_input_bytes())
    if not memory.sources:
        raise DataValidationError(f"{shown}: no pairs to review")
    if "score" not in memory.properties:
        raise DataValidationError(
            f"{shown}: its units have no x-score (bitext-hf align writes one): nothing to sort by"
        )
    columns = {"score": memory.properties["score"], "src": memory.sources, "tgt": memory.targets}
    if "quality" in memory.properties:
        columns["quality"] = memory.properties["quality"]
    return pa.table(columns), (memory.src_lang, memory.tgt_lang)


def _text_format(path: Path) -> str | None:
    """The input's format when it is text of a row a line (the table writer's own reading of the extension)."""
    try:
        format = output_format(path)
    except UsageError:  # .tmx: not one of the table formats
        return None
    return format if format in ("tsv", "csv", "jsonl") else None


def _write_arrow(table: Any, format: str, handle: Any, out: Path) -> None:
    import pyarrow as pa
    import pyarrow.csv as pa_csv
    import pyarrow.parquet as pq

    if format == "parquet":
        pq.write_table(table, handle)
    elif format == "jsonl":
        for record in table.to_pylist():
            handle.write((json.dumps(record, ensure_ascii=False) + "\n").encode())
    else:
        delimiter = "\t" if format == "tsv" else ","
        quoting = "none" if format == "tsv" else "needed"
        try:
            pa_csv.write_csv(
                table, handle, pa_csv.WriteOptions(delimiter=delimiter, quoting_style=quoting, include_header=True)
            )
        except pa.ArrowInvalid as error:  # TSV has no quoting: a cell with a tab or a line break cannot be written
            raise UsageError(
                f"export {escape_controls(str(out))}: a pair holds a tab or a line break, which TSV cannot hold; "
                "export .csv, .jsonl or .parquet instead"
            ) from error


def file_fingerprint(path: Path) -> dict[str, Any]:
    """A file's name, size and SHA-256, which a decisions file records so as never to apply to another file."""
    digest = hashlib.sha256()
    for chunk in iter_input_chunks(path):
        digest.update(chunk)
    return {"name": path.name, "size": path.stat().st_size, "sha256": digest.hexdigest()}
