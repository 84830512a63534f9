"""Readers for the corpus formats of the field. Each validates its input and fails with one line naming the file
(and line) of the problem, before any work is done on it.

Formats: plain text (a sentence a line), TSV pairs, Moses-style parallel files (two aligned plain-text files), the
MTEB bitext-mining format (columns ``sentence1`` / ``sentence2``, optional ``gold``), BUCC files
(``id<TAB>sentence`` plus a gold file of ``src_id<TAB>tgt_id`` lines).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from bitext_hf.errors import DataValidationError

__all__ = [
    "DEFAULT_MAX_LINE_CHARS",
    "BitextTask",
    "DataValidationError",
    "deduplicate",
    "read_bucc",
    "read_lines",
    "read_moses",
    "read_mteb",
    "read_tsv_pairs",
]

logger = logging.getLogger(__name__)

# Longer lines are almost always broken input (a whole document on one line, a binary file); encoders truncate far
# earlier, so mining such a line would silently compare only its beginning.
DEFAULT_MAX_LINE_CHARS = 10_000


def _decode_lines(path: Path, *, max_chars: int, allow_empty_lines: bool) -> list[str]:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise DataValidationError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise DataValidationError(f"{path}: is a directory, expected a text file") from None
    if raw.startswith(b"\xef\xbb\xbf"):
        raw = raw[3:]
    if not raw.strip():
        raise DataValidationError(f"{path}: file is empty")
    if b"\x00" in raw:
        line = raw[: raw.index(b"\x00")].count(b"\n") + 1
        raise DataValidationError(f"{path}:{line}: NUL byte; this looks like a binary file, not UTF-8 text")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        line = raw[: error.start].count(b"\n") + 1
        raise DataValidationError(
            f"{path}:{line}: invalid UTF-8 (byte 0x{raw[error.start]:02x}); convert the file to UTF-8, "
            "e.g. `iconv -f latin1 -t utf-8`"
        ) from None
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # the final newline ends the last line, it does not start a new one
    lines = [line[:-1] if line.endswith("\r") else line for line in lines]
    for number, line in enumerate(lines, start=1):
        if len(line) > max_chars:
            raise DataValidationError(
                f"{path}:{number}: line of {len(line)} characters exceeds the limit of {max_chars} "
                "(raise it with --max-line-chars if this is intended)"
            )
        if not allow_empty_lines and not line.strip():
            raise DataValidationError(
                f"{path}:{number}: empty line; every line must hold a sentence (line numbers are sentence ids)"
            )
    return lines


def read_lines(
    path: str | os.PathLike, *, max_chars: int = DEFAULT_MAX_LINE_CHARS, allow_empty_lines: bool = False
) -> list[str]:
    """Read a plain-text file with one sentence per line (UTF-8, no NUL bytes, no empty or overlong lines)."""
    return _decode_lines(Path(path), max_chars=max_chars, allow_empty_lines=allow_empty_lines)


def read_tsv_pairs(
    path: str | os.PathLike,
    *,
    src_column: int = 0,
    tgt_column: int = 1,
    max_chars: int = DEFAULT_MAX_LINE_CHARS,
    skip_header: bool | None = None,
) -> tuple[list[str], list[str]]:
    """Read tab-separated sentence pairs; returns aligned (sources, targets).

    Args:
        skip_header (bool, optional): drop the first line; by default, a first line that reads ``src<TAB>tgt``,
            ``source<TAB>target`` or ``sentence1<TAB>sentence2`` is taken as a header.
    """
    path = Path(path)
    lines = _decode_lines(path, max_chars=max_chars, allow_empty_lines=False)
    first = 1
    if skip_header is None:
        head = [cell.strip().lower() for cell in lines[0].split("\t")]
        skip_header = len(head) >= 2 and (head[0], head[1]) in {
            ("src", "tgt"), ("source", "target"), ("sentence1", "sentence2"),
        }  # fmt: skip
    if skip_header:
        lines, first = lines[1:], 2
        if not lines:
            raise DataValidationError(f"{path}: only a header, no sentence pairs")
    sources, targets = [], []
    needed = max(src_column, tgt_column) + 1
    for number, line in enumerate(lines, start=first):
        cells = line.split("\t")
        if len(cells) < needed:
            raise DataValidationError(
                f"{path}:{number}: expected at least {needed} tab-separated columns, got {len(cells)}"
            )
        src, tgt = cells[src_column].strip(), cells[tgt_column].strip()
        if not src or not tgt:
            raise DataValidationError(f"{path}:{number}: empty {'source' if not src else 'target'} sentence")
        sources.append(src)
        targets.append(tgt)
    return sources, targets


def read_moses(
    src_path: str | os.PathLike, tgt_path: str | os.PathLike, *, max_chars: int = DEFAULT_MAX_LINE_CHARS
) -> tuple[list[str], list[str]]:
    """Read Moses-style parallel files (line i of one is the translation of line i of the other)."""
    sources = read_lines(src_path, max_chars=max_chars)
    targets = read_lines(tgt_path, max_chars=max_chars)
    if len(sources) != len(targets):
        raise DataValidationError(
            f"{src_path} has {len(sources)} lines but {tgt_path} has {len(targets)}: parallel files must be line-aligned"
        )
    return sources, targets


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


def _load_table(path: str | os.PathLike, split: str | None):
    """Rows of an MTEB-style table from a file (.jsonl/.json/.parquet/.csv/.tsv) or a saved `datasets` folder."""
    path = Path(path)
    if path.is_dir():
        import datasets

        loaded = datasets.load_from_disk(str(path))
        if isinstance(loaded, datasets.DatasetDict):
            name = split or ("test" if "test" in loaded else next(iter(loaded)))
            if name not in loaded:
                raise DataValidationError(f"{path}: no split {name!r}; available: {', '.join(loaded)}")
            loaded = loaded[name]
        return loaded.to_list()
    if not path.exists():
        raise DataValidationError(
            f"{path}: no such file. MTEB data must be local here (a .jsonl/.parquet file or a `save_to_disk` folder); "
            "download it elsewhere with `datasets.load_dataset(...).save_to_disk(...)`"
        )
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        import pyarrow.parquet as pq

        return pq.read_table(path).to_pylist()
    if suffix in (".jsonl", ".json"):
        text = "\n".join(_decode_lines(path, max_chars=10**9, allow_empty_lines=True))
        if suffix == ".json" and text.lstrip().startswith("["):
            return json.loads(text)
        rows = []
        for number, line in enumerate(text.split("\n"), start=1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as error:
                    raise DataValidationError(f"{path}:{number}: invalid JSON ({error.msg})") from None
        return rows
    if suffix in (".csv", ".tsv"):
        import csv

        with path.open(encoding="utf-8", newline="") as handle:
            return list(csv.DictReader(handle, delimiter="\t" if suffix == ".tsv" else ","))
    raise DataValidationError(
        f"{path}: unsupported MTEB file type {suffix!r}; use .jsonl, .json, .parquet, .csv or .tsv"
    )


def read_mteb(
    path: str | os.PathLike,
    *,
    split: str | None = None,
    subset: str | None = None,
    gold_base: int = 1,
) -> BitextTask:
    """Read MTEB bitext-mining data: rows with ``sentence1`` / ``sentence2`` (row i of each is a pair), or, for
    BUCC-style tasks, an optional ``gold`` column of (i, j) pairs (MTEB stores them 1-based: ``gold_base=1``).

    Args:
        path: a .jsonl / .json / .parquet / .csv / .tsv file or a folder saved with ``datasets.save_to_disk``.
        subset (str, optional): keep only rows whose ``lang`` / ``subset`` column equals this value.
    """
    rows = _load_table(path, split)
    if subset is not None:
        rows = [row for row in rows if row.get("lang", row.get("subset")) == subset]
    if not rows:
        raise DataValidationError(f"{path}: no rows" + (f" for subset {subset!r}" if subset else ""))
    missing = [column for column in ("sentence1", "sentence2") if column not in rows[0]]
    if missing:
        raise DataValidationError(f"{path}: missing column(s) {', '.join(missing)}; found {', '.join(rows[0])}")
    gold_rows = [row.get("gold") for row in rows if row.get("gold")]
    if gold_rows:
        # Sentences of both sides (some rows may hold only one side), gold pairs as a list of pairs.
        sources = [row["sentence1"] for row in rows if row.get("sentence1")]
        targets = [row["sentence2"] for row in rows if row.get("sentence2")]
        pairs = gold_rows[0] if len(gold_rows) == 1 else [pair for gold in gold_rows for pair in gold]
        gold = [(int(i) - gold_base, int(j) - gold_base) for i, j in pairs]
        bad = [(i, j) for i, j in gold if not (0 <= i < len(sources) and 0 <= j < len(targets))]
        if bad:
            raise DataValidationError(f"{path}: gold pair {bad[0]} out of range (gold_base={gold_base})")
    else:
        sources, targets = [], []
        for number, row in enumerate(rows, start=1):
            src, tgt = row.get("sentence1"), row.get("sentence2")
            if not isinstance(src, str) or not isinstance(tgt, str) or not src.strip() or not tgt.strip():
                raise DataValidationError(f"{path}: row {number} has an empty or missing sentence1/sentence2")
            sources.append(src)
            targets.append(tgt)
        gold = [(i, i) for i in range(len(sources))]
    return BitextTask(sources, targets, gold, name=Path(path).stem + (f"/{subset}" if subset else ""))


def _read_bucc_side(path: Path, max_chars: int) -> tuple[list[str], list[str]]:
    ids, sentences = [], []
    for number, line in enumerate(_decode_lines(path, max_chars=max_chars, allow_empty_lines=False), start=1):
        sentence_id, sep, sentence = line.partition("\t")
        if not sep or not sentence.strip():
            raise DataValidationError(f"{path}:{number}: expected `id<TAB>sentence`")
        ids.append(sentence_id.strip())
        sentences.append(sentence.strip())
    duplicates = len(ids) - len(set(ids))
    if duplicates:
        raise DataValidationError(f"{path}: {duplicates} duplicate sentence id(s)")
    return ids, sentences


def read_bucc(
    src_path: str | os.PathLike,
    tgt_path: str | os.PathLike,
    gold_path: str | os.PathLike | None = None,
    *,
    max_chars: int = DEFAULT_MAX_LINE_CHARS,
) -> BitextTask:
    """Read BUCC shared-task files: ``id<TAB>sentence`` per language and a gold file of ``src_id<TAB>tgt_id``."""
    src_ids, sources = _read_bucc_side(Path(src_path), max_chars)
    tgt_ids, targets = _read_bucc_side(Path(tgt_path), max_chars)
    gold: list[tuple[int, int]] = []
    if gold_path is not None:
        src_row = {sid: i for i, sid in enumerate(src_ids)}
        tgt_row = {tid: j for j, tid in enumerate(tgt_ids)}
        for number, line in enumerate(_decode_lines(Path(gold_path), max_chars=max_chars, allow_empty_lines=True), 1):
            if not line.strip():
                continue
            cells = line.split("\t")
            if len(cells) != 2 or cells[0] not in src_row or cells[1] not in tgt_row:
                raise DataValidationError(f"{gold_path}:{number}: expected `src_id<TAB>tgt_id` with known ids")
            gold.append((src_row[cells[0]], tgt_row[cells[1]]))
    return BitextTask(sources, targets, gold, name=Path(src_path).stem, source_ids=src_ids, target_ids=tgt_ids)


def deduplicate(sentences: Sequence[str]) -> tuple[list[str], list[int]]:
    """Unique sentences (first occurrence order) and, for every input row, the row of its unique sentence."""
    first_row: dict[str, int] = {}
    inverse = [first_row.setdefault(sentence, len(first_row)) for sentence in sentences]
    return list(first_row), inverse
