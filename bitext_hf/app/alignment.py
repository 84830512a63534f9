"""The review of an alignment: two documents (one sentence a line, or running text split as ``align --split`` splits
it) and the beads ``bitext-hf align`` wrote for them (any of its formats but TMX, which keeps only the links).

A reviewer sees both documents bead by bead, the weak beads marked (a score under a bound, a sentence without
counterpart, a bead edited by hand), and can split a bead, merge it with the next, or reject it (its sentences then
have no counterpart). Every edit keeps what an alignment is: each sentence of both documents in exactly one bead,
in order. The edited beads are kept in ``<alignment file>.review.json`` beside the alignment (never in it), with the
size and SHA-256 of the three inputs, and exported in align's formats by :func:`bitext_hf.data.write_alignment`'s
writer.
"""

from __future__ import annotations

import dataclasses
import math
import os
import threading
from pathlib import Path
from typing import Any

import numpy as np

from bitext_hf.app.review import decisions_path, file_fingerprint, one_at_a_time, read_decisions, write_decisions
from bitext_hf.errors import DataValidationError, UsageError
from bitext_hf.io.outputs import non_regular_kind
from bitext_hf.io.terminal import escape_controls

__all__ = ["BEAD_KINDS", "AlignmentReview"]

BEAD_KINDS = ("all beads", "weak beads")
_SEPARATOR = " "  # how a bead's sentences are joined for the page (align's tsv joins them the same way)


@dataclasses.dataclass
class _EditedAlignment:
    """What :func:`bitext_hf.data.alignment_files.write_alignment` writes from (its ``Beads`` protocol)."""

    beads: list[tuple[list[int], list[int]]]
    scores: np.ndarray


def _regular_file(path: Path, what: str) -> None:
    kind = non_regular_kind(path, named=True)
    if kind is not None:
        raise DataValidationError(f"{escape_controls(str(path))}: is {kind}, not {what}")
    if not path.exists():
        raise DataValidationError(f"{escape_controls(str(path))}: no such file")


def _line_numbers(value: Any, shown: str, row: int) -> list[int]:
    """A ``src_lines`` / ``tgt_lines`` cell as align writes it: a list (jsonl, parquet), ``"0,1"`` or one number
    (tsv, which Arrow may read as an integer), empty for none."""
    if value is None or value == "":
        return []
    if isinstance(value, int) and not isinstance(value, bool):
        return [value]
    try:
        numbers = [int(part) for part in value.split(",")] if isinstance(value, str) else [int(v) for v in value]
    except (TypeError, ValueError):
        raise DataValidationError(f"{shown}: row {row + 1}: line numbers must be like 0,1; got {value!r}") from None
    return numbers


def read_alignment_beads(path: Path) -> tuple[list[tuple[list[int], list[int]]], list[float]]:
    """The beads and scores of an alignment file that ``align`` wrote: vecalign (``[0]:[0, 1]:0.734215``), tsv, jsonl
    or parquet (their ``src_lines`` / ``tgt_lines`` columns)."""
    from bitext_hf.data.alignment_files import alignment_format, read_scored_beads

    format = alignment_format(path)
    shown = escape_controls(os.fspath(path))
    if format == "tmx":
        raise UsageError(
            f"{shown}: a TMX file keeps only the links, not the beads: review the alignment in another "
            "of align's formats (vecalign, tsv, jsonl, parquet)"
        )
    if format == "vecalign":
        return read_scored_beads(path)
    from bitext_hf.hub.dataset_card import read_pairs_table

    table = read_pairs_table(path)
    for column in ("src_lines", "tgt_lines"):
        if column not in table.column_names:
            raise DataValidationError(f"{shown}: not an alignment: no column {column} (is it a file of pairs?)")
    src = table.column("src_lines").to_pylist()
    tgt = table.column("tgt_lines").to_pylist()
    beads = [(_line_numbers(a, shown, row), _line_numbers(b, shown, row)) for row, (a, b) in enumerate(zip(src, tgt))]
    return beads, table.column("score").to_numpy(zero_copy_only=False).astype(np.float64).tolist()


def check_coverage(beads, src_count: int, tgt_count: int, shown: str) -> None:
    """Every sentence of both documents in exactly one bead, in order (what align writes, and vecalign's scorer
    needs); else a data error naming the first bead that breaks it."""
    next_src = next_tgt = 0
    for number, (xs, ys) in enumerate(beads):
        if not xs and not ys:
            raise DataValidationError(f"{shown}: bead {number}: holds no sentence")
        for side, lines, expected in (("source", xs, next_src), ("target", ys, next_tgt)):
            if lines and lines != list(range(expected, expected + len(lines))):
                raise DataValidationError(
                    f"{shown}: bead {number}: {side} sentences {lines} do not follow sentence {expected - 1}; an "
                    "alignment covers each sentence once, in order (were the documents given in this order?)"
                )
        next_src += len(xs)
        next_tgt += len(ys)
    for side, covered, count in (("source", next_src, src_count), ("target", next_tgt, tgt_count)):
        if covered != count:
            raise DataValidationError(
                f"{shown}: covers {covered:,} {side} sentences, the {side} document has {count:,} (another document, "
                "or read otherwise than align read it: its --split, --clauses and languages, which its sidecar records)"
            )


def _align_record(alignment: Path) -> dict[str, Any]:
    """What align recorded beside an alignment (its settings, how it read the documents): the sidecar of the file,
    else of its folder (many documents); ``{}`` when there is none, or when it is no alignment's.

    Raises:
        DataValidationError: a sidecar that cannot be read (a FIFO, a folder, a link to nothing, not JSON), named.
    """
    from bitext_hf.data.alignment_files import SIDECAR_NAME
    from bitext_hf.data.pair_files import metadata_path
    from bitext_hf.hub.alignment_card import is_alignment
    from bitext_hf.hub.dataset_card import read_sidecar

    for sidecar in (metadata_path(alignment), alignment.parent / SIDECAR_NAME):
        if os.path.lexists(sidecar):
            record = read_sidecar(sidecar)
            return record if is_alignment(record) else {}
    return {}


def _language(value: Any) -> str | None:
    return value if isinstance(value, str) and value.strip() else None


class AlignmentReview:
    """A review of one alignment: the documents and beads read and checked, the edits beside the alignment file.

    Args:
        src, tgt: the two documents, one sentence a line (``split``: running text, split as ``align --split`` does,
            in ``src_lang`` / ``tgt_lang``, English's rules when not given; ``clauses``: as ``--split --clauses``).
            Each of ``split``, ``clauses``, ``src_lang`` and ``tgt_lang`` left at None is what align recorded in the
            alignment's sidecar (``<alignment>.meta.json``, or its folder's ``alignment.meta.json``), else off / None.
        alignment: the beads align wrote for them.
    """

    def __init__(
        self,
        src: str | os.PathLike,
        tgt: str | os.PathLike,
        alignment: str | os.PathLike,
        *,
        split: bool | None = None,
        clauses: bool | None = None,
        src_lang: str | None = None,
        tgt_lang: str | None = None,
    ):
        from bitext_hf.data import read_lines

        for name, value in (("split", split), ("clauses", clauses)):
            if value is not None and not isinstance(value, bool):
                raise UsageError(f"{name} must be True, False or None (as align recorded), not {value!r}")
        for name, value in (("src", src), ("tgt", tgt), ("alignment", alignment)):
            if not isinstance(value, str | os.PathLike) or not os.fspath(value):
                raise UsageError(f"{name} must be the path of a file, not {value!r}")
        for name, value in (("src_lang", src_lang), ("tgt_lang", tgt_lang)):
            if value is not None and not isinstance(value, str):
                raise UsageError(f"{name} must be a language code or None, not {value!r}")
        self.paths = {"src": Path(src), "tgt": Path(tgt), "alignment": Path(alignment)}
        self._lock = threading.RLock()
        for name, path in self.paths.items():
            _regular_file(path, "an alignment" if name == "alignment" else "a document")
        recorded = _align_record(self.paths["alignment"])
        split = recorded.get("split") is True if split is None else split
        clauses = recorded.get("clauses") is True if clauses is None else clauses
        if clauses and not split:
            raise UsageError("clauses cuts running text at clauses' ends: it needs split (align's --split)")
        src_lang, tgt_lang = (
            given if given is not None else _language(recorded.get(key))
            for given, key in ((src_lang, "src_lang"), (tgt_lang, "tgt_lang"))
        )
        self.languages = (src_lang, tgt_lang)
        sides = []
        for path, lang in ((self.paths["src"], src_lang), (self.paths["tgt"], tgt_lang)):
            if split:
                from bitext_hf.data.sentences import split_document

                lines = read_lines(path, allow_empty_lines=True)
                sides.append(split_document(lines, lang or "en", clauses).sentences)
            else:
                sides.append(read_lines(path))
        self.src, self.tgt = sides
        self.shown = escape_controls(os.fspath(self.paths["alignment"]))
        beads, scores = read_alignment_beads(self.paths["alignment"])
        check_coverage(beads, len(self.src), len(self.tgt), self.shown)
        self.fingerprints = {name: file_fingerprint(path) for name, path in self.paths.items()}
        self.beads = beads
        self.scores = [float(score) for score in scores]
        self.edited = [False] * len(beads)
        self.original = len(beads)
        self._restore()

    @property
    def decisions_path(self) -> Path:
        return decisions_path(self.paths["alignment"])

    def _restore(self) -> None:
        saved = read_decisions(self.decisions_path)
        if saved is None:
            return
        shown = escape_controls(str(self.decisions_path))
        if saved.get("inputs") != self.fingerprints:
            raise DataValidationError(
                f"{shown}: holds edits of other versions of these documents or this alignment (their sizes or "
                "SHA-256 differ); move it away to start over"
            )
        try:
            beads = [(list(xs), list(ys)) for xs, ys in saved["beads"]]
            scores = [float("nan") if score is None else float(score) for score in saved["scores"]]
            edited = [bool(flag) for flag in saved["edited"]]
            if not len(beads) == len(scores) == len(edited):
                raise ValueError("beads, scores and edited differ in length")
        except (ValueError, TypeError, KeyError) as error:
            raise DataValidationError(
                f"{shown}: not a review's decisions file ({escape_controls(str(error))}); move it away to start over"
            ) from None
        check_coverage(beads, len(self.src), len(self.tgt), shown)
        self.beads, self.scores, self.edited = beads, scores, edited

    @one_at_a_time
    def save(self) -> None:
        """Write the edited beads beside the alignment (:func:`bitext_hf.app.review.write_decisions`)."""
        write_decisions(
            self.decisions_path,
            {
                "inputs": self.fingerprints,
                "beads": self.beads,
                "scores": [None if math.isnan(score) else score for score in self.scores],
                "edited": self.edited,
            },
        )

    # -- edits -------------------------------------------------------------------------------------------------
    def _bead(self, number: int) -> tuple[list[int], list[int]]:
        if type(number) is not int or not 0 <= number < len(self.beads):
            raise UsageError(f"a bead is a number from 0 to {len(self.beads) - 1}, not {number!r}")
        return self.beads[number]

    def _replace(self, start: int, stop: int, beads, scores) -> None:
        self.beads[start:stop] = beads
        self.scores[start:stop] = scores
        self.edited[start:stop] = [True] * len(beads)
        self.save()

    @one_at_a_time
    def reject(self, number: int) -> None:
        """Bead ``number``'s sentences get no counterpart: one 1-0 bead per source sentence, one 0-1 per target."""
        xs, ys = self._bead(number)
        if not xs or not ys:
            raise UsageError(f"bead {number} has no counterpart to reject (it is {len(xs)}-{len(ys)})")
        beads = [([x], []) for x in xs] + [([], [y]) for y in ys]
        self._replace(number, number + 1, beads, [0.0] * len(beads))

    @one_at_a_time
    def split(self, number: int) -> None:
        """Bead ``number`` as two: its first source and first target sentence, then the rest (a 2-1 bead becomes a
        1-1 and a 1-0); both keep its score until the alignment is scored again."""
        xs, ys = self._bead(number)
        if len(xs) + len(ys) <= 2:
            raise UsageError(f"bead {number} is {len(xs)}-{len(ys)}: nothing to split (reject it instead)")
        first, rest = (xs[:1], ys[:1]), (xs[1:], ys[1:])
        score = self.scores[number]
        self._replace(number, number + 1, [first, rest], [score, score])

    @one_at_a_time
    def merge(self, number: int) -> None:
        """Bead ``number`` and the next as one; its score is the lower of theirs."""
        xs, ys = self._bead(number)
        if number + 1 >= len(self.beads):
            raise UsageError(f"bead {number} is the last: there is no next bead to merge it with")
        next_xs, next_ys = self.beads[number + 1]
        score = float(np.nanmin([self.scores[number], self.scores[number + 1], np.inf]))
        self._replace(number, number + 2, [(xs + next_xs, ys + next_ys)], [0.0 if score == np.inf else score])

    # -- what the page shows -----------------------------------------------------------------------------------
    @one_at_a_time
    def weak(self, below: float | None) -> np.ndarray:
        """The beads to look at: a score under ``below`` (None: none by score), a sentence without counterpart, or
        edited by hand."""
        scores = np.asarray(self.scores, dtype=np.float64)
        lonely = np.fromiter((not xs or not ys for xs, ys in self.beads), dtype=bool, count=len(self.beads))
        weak = lonely | np.asarray(self.edited, dtype=bool)
        if below is not None:
            weak |= scores < below
        return weak

    @one_at_a_time
    def rows(self, kind: str = BEAD_KINDS[0], below: float | None = None) -> np.ndarray:
        if kind not in BEAD_KINDS:
            raise UsageError(f"kind must be one of {', '.join(BEAD_KINDS)}, not {kind!r}")
        if kind == "weak beads":
            return np.flatnonzero(self.weak(below))
        return np.arange(len(self.beads))

    @one_at_a_time
    def page(self, rows: np.ndarray, number: int, size: int = 50, below: float | None = None) -> list[dict[str, Any]]:
        if type(number) is not int or number < 1 or type(size) is not int or size < 1:
            raise UsageError(f"a page is a number from 1 and a size from 1, not {number!r} and {size!r}")
        weak = self.weak(below)
        shown = []
        for bead in rows[(number - 1) * size : number * size].tolist():
            xs, ys = self.beads[bead]
            shown.append(
                {
                    "bead": bead,
                    "score": self.scores[bead],
                    "kind": f"{len(xs)}-{len(ys)}",
                    "src": _SEPARATOR.join(self.src[x] for x in xs),
                    "tgt": _SEPARATOR.join(self.tgt[y] for y in ys),
                    "weak": bool(weak[bead]),
                    "edited": self.edited[bead],
                }
            )
        return shown

    @one_at_a_time
    def summary(self) -> dict[str, int]:
        links = sum(1 for xs, ys in self.beads if xs and ys)
        return {
            "beads": len(self.beads),
            "links": links,
            "without_counterpart": len(self.beads) - links,
            "edited": sum(self.edited),
        }

    # -- export ------------------------------------------------------------------------------------------------
    @one_at_a_time
    def export(self, out: str | os.PathLike, format: str | None = None) -> tuple[Path, int]:
        """Write the reviewed alignment to ``out`` in one of align's formats (from the extension, else vecalign;
        tmx needs both languages). Returns the path and the number of beads.

        Raises:
            UsageError: ``out`` is one of the inputs or the decisions file, a link, a FIFO or a folder; tmx without
                both languages.
            DataValidationError: an input changed since the review read it.
        """
        from bitext_hf.data.alignment_files import alignment_format, write_alignment
        from bitext_hf.io import OutputSet

        out = Path(out)
        format = alignment_format(out, format)
        if format == "tmx" and not all(self.languages):
            raise UsageError("a TMX export names both languages: give the source and target language")
        outputs = OutputSet(inputs=[*self.paths.values(), self.decisions_path], option="export")
        outputs.add(out)
        for name, path in self.paths.items():
            if file_fingerprint(path) != self.fingerprints[name]:
                raise DataValidationError(f"{escape_controls(str(path))}: changed since the review read it")
        edited = _EditedAlignment(list(self.beads), np.nan_to_num(np.asarray(self.scores, dtype=np.float64)))
        with outputs:
            with outputs.staged(out) as staged:
                write_alignment(
                    edited, staged, self.src, self.tgt, format, languages=self.languages if format == "tmx" else None
                )
            outputs.commit()
        return out, len(self.beads)
