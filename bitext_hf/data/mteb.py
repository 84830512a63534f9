"""The MTEB bitext-mining format: rows with ``sentence1`` / ``sentence2`` (row i of each is a pair) or, for
BUCC-style tasks, a ``gold`` column of (i, j) index pairs; one task per subset (a ``lang`` or ``subset`` column).

Files: ``.jsonl`` / ``.json`` / ``.csv`` / ``.tsv`` (optionally compressed; a UTF-8 BOM is dropped), ``.parquet``,
or a folder saved with ``datasets.save_to_disk``. Every problem is one line naming the file and line (or row).
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import re
import reprlib
from pathlib import Path

from bitext_hf.data.readers import BitextTask, decode_text, display_name, split_lines
from bitext_hf.errors import DataValidationError, UsageError
from bitext_hf.io import compression_of

__all__ = ["SUBSET_COLUMNS", "read_mteb"]

# Columns that name the subset (language pair) of a row, as MTEB's bitext-mining datasets use them.
SUBSET_COLUMNS = ("lang", "subset")
DEFAULT_SUBSET = "default"

Located = tuple[str, object]  # ("file:line" or "file: row N", the row as parsed)


def _base_name(path: str) -> str:
    """The file name without a compression suffix: ``t.jsonl.gz`` -> ``t.jsonl``."""
    name = Path(path).name
    return name[: -len(Path(name).suffix)] if compression_of(name) else name


# A JSON string (escapes included) or a bracket: what _deepest_nesting needs to see of a JSON text.
_JSON_NESTING = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]')


def _deepest_nesting(text: str) -> tuple[int, int]:
    """(line, depth) of the first place where ``text`` is nested deepest; json reports only a RecursionError, without
    a position, for a text nested deeper than the interpreter's recursion limit."""
    depth = deepest = where = 0
    for token in _JSON_NESTING.finditer(text):
        bracket = token[0]
        if bracket in "[{":
            depth += 1
            if depth > deepest:
                deepest, where = depth, token.start()
        elif bracket in "]}":
            depth -= 1
    return text.count("\n", 0, where) + 1, deepest


def _too_deep(location: str, depth: int) -> DataValidationError:
    return DataValidationError(f"{location}: JSON nested too deeply ({depth} levels); rows hold flat records")


def _json_rows(path: str, name: str, allow_array: bool) -> list[Located]:
    text = decode_text(path)
    if allow_array and text.lstrip().startswith("["):
        try:
            items = json.loads(text)
        except json.JSONDecodeError as error:
            raise DataValidationError(f"{name}:{error.lineno}: invalid JSON ({error.msg})") from None
        except RecursionError:
            line, depth = _deepest_nesting(text)
            raise _too_deep(f"{name}:{line}", depth) from None
        return [(f"{name}: item {number}", item) for number, item in enumerate(items, start=1)]
    rows = []
    for number, line in enumerate(split_lines(text), start=1):
        if line.strip():
            try:
                rows.append((f"{name}:{number}", json.loads(line)))
            except json.JSONDecodeError as error:
                raise DataValidationError(f"{name}:{number}: invalid JSON ({error.msg})") from None
            except RecursionError:
                raise _too_deep(f"{name}:{number}", _deepest_nesting(line)[1]) from None
    return rows


def _csv_rows(path: str, name: str, delimiter: str) -> list[Located]:
    reader = csv.DictReader(io.StringIO(decode_text(path), newline=""), delimiter=delimiter)  # BOM dropped
    rows = []
    try:
        for row in reader:
            rows.append((f"{name}:{reader.line_num}", row))
    except csv.Error as error:
        raise DataValidationError(f"{name}:{reader.line_num}: {error}") from None
    return rows


def _load_rows(path: str, split: str | None) -> list[Located]:
    """The rows of a table file or a saved `datasets` folder, each with where it came from."""
    name = display_name(path)
    if path != "-" and os.path.isdir(path):
        import datasets

        try:
            loaded = datasets.load_from_disk(path)
        except FileNotFoundError:
            raise DataValidationError(
                f"{name}: a folder, but not one saved with `datasets.save_to_disk` (no dataset_info.json / "
                "dataset_dict.json)"
            ) from None
        if isinstance(loaded, datasets.DatasetDict):
            chosen = split or ("test" if "test" in loaded else next(iter(loaded)))
            if chosen not in loaded:
                raise UsageError(f"{name}: no split {chosen!r}; available: {', '.join(loaded)}")
            loaded = loaded[chosen]
        return [(f"{name}: row {number}", row) for number, row in enumerate(loaded.to_list(), start=1)]
    if path != "-" and not os.path.exists(path):
        raise DataValidationError(
            f"{name}: no such file. MTEB data must be local here (a .jsonl/.parquet file or a `save_to_disk` "
            "folder); download it elsewhere with `datasets.load_dataset(...).save_to_disk(...)`"
        )
    suffix = ".jsonl" if path == "-" else Path(_base_name(path)).suffix.lower()
    if suffix == ".parquet":
        import pyarrow
        import pyarrow.parquet as pq

        try:
            table = pq.read_table(path)
        except (pyarrow.ArrowException, OSError) as error:
            raise DataValidationError(f"{name}: not a readable Parquet file ({error})") from None
        return [(f"{name}: row {number}", row) for number, row in enumerate(table.to_pylist(), start=1)]
    if suffix in (".jsonl", ".json"):
        return _json_rows(path, name, allow_array=suffix == ".json")
    if suffix in (".csv", ".tsv"):
        return _csv_rows(path, name, "\t" if suffix == ".tsv" else ",")
    raise DataValidationError(
        f"{name}: unsupported MTEB file type {suffix!r}; use .jsonl, .json, .parquet, .csv or .tsv"
    )


def _gold_pairs(location: str, value: object, gold_base: int) -> list[tuple[int, int]]:
    """(i, j) pairs from a row's ``gold`` cell (a list, or its JSON text in CSV files), made 0-based."""
    if isinstance(value, str):
        # Not JSON (or nested past the recursion limit): reported below as not a list of pairs.
        with contextlib.suppress(json.JSONDecodeError, RecursionError):
            value = json.loads(value)
    pairs = value if isinstance(value, (list, tuple)) else [value]
    result = []
    for pair in pairs:
        ok = isinstance(pair, (list, tuple)) and len(pair) == 2
        ok = ok and all(isinstance(index, int) and not isinstance(index, bool) for index in pair)
        if not ok:
            # reprlib: a short repr at any nesting depth, where repr() of a deep list would recurse past the limit
            found = reprlib.repr(pair)
            raise DataValidationError(f"{location}: gold must be a list of [i, j] index pairs; found {found}")
        result.append((pair[0] - gold_base, pair[1] - gold_base))
    return result


def _sentence(location: str, row: dict, column: str) -> str:
    value = row.get(column)
    if not isinstance(value, str) or not value.strip():
        raise DataValidationError(f"{location}: empty or missing {column}")
    return value


def _task(rows: list[Located], columns: tuple[str, str], gold_base: int, name: str) -> BitextTask:
    src_column, tgt_column = columns
    gold_rows = [(location, row["gold"]) for location, row in rows if row.get("gold") not in (None, "", [], ())]
    if not gold_rows:
        sources = [_sentence(location, row, src_column) for location, row in rows]
        targets = [_sentence(location, row, tgt_column) for location, row in rows]
        return BitextTask(sources, targets, [(i, i) for i in range(len(sources))], name=name)
    # BUCC-style: the sentences of each side (some rows may hold only one side), gold pairs between them.
    sources = [_sentence(location, row, src_column) for location, row in rows if row.get(src_column)]
    targets = [_sentence(location, row, tgt_column) for location, row in rows if row.get(tgt_column)]
    gold = []
    for location, value in gold_rows:
        for i, j in _gold_pairs(location, value, gold_base):
            if not (0 <= i < len(sources) and 0 <= j < len(targets)):
                raise DataValidationError(
                    f"{location}: gold pair ({i + gold_base}, {j + gold_base}) out of range for {len(sources)} "
                    f"sources and {len(targets)} targets (gold_base={gold_base})"
                )
            gold.append((i, j))
    return BitextTask(sources, targets, gold, name=name)


def read_mteb(
    path: str | os.PathLike,
    *,
    split: str | None = None,
    subset: str | None = None,
    columns: tuple[str, str] | None = None,
    gold_base: int = 1,
) -> dict[str, BitextTask]:
    """Read MTEB bitext-mining data; returns one ``BitextTask`` per subset (``"default"`` when the file has no
    ``lang`` / ``subset`` column), in the order the subsets first appear.

    Args:
        path: a .jsonl / .json / .parquet / .csv / .tsv file (``-`` is JSON Lines on stdin) or a folder saved with
            ``datasets.save_to_disk`` (``split`` picks the split; "test" by default).
        subset (str, optional): only this subset; an unknown one raises ``UsageError`` listing the valid ones.
        columns (tuple, optional): the two sentence columns, e.g. ``("sentence_eng_Latn", "sentence_deu_Latn")``
            for Flores-style files; default ``("sentence1", "sentence2")``.
        gold_base (int): MTEB stores ``gold`` pairs 1-based.
    """
    path = os.fspath(path)
    name = display_name(path)
    rows = _load_rows(path, split)
    if not rows:
        raise DataValidationError(f"{name}: no rows")
    for location, row in rows:
        if not isinstance(row, dict):
            raise DataValidationError(f"{location}: expected a JSON object per row, got {type(row).__name__}")
    found = [str(key) for key in dict.fromkeys(key for _, row in rows for key in row) if key is not None]
    if columns is not None and len(columns) != 2:
        raise UsageError(f"columns: give two column names (source, target), not {len(columns)}")
    wanted = tuple(columns) if columns else ("sentence1", "sentence2")
    missing = [column for column in wanted if column not in found]
    if missing and columns:
        raise UsageError(f"{name}: no column(s) {', '.join(missing)} to read as sentences; found {', '.join(found)}")
    if missing:
        raise DataValidationError(
            f"{name}: missing column(s) {', '.join(missing)}; found {', '.join(found)} "
            "(name the two sentence columns with columns=/--columns)"
        )
    subset_column = next((column for column in SUBSET_COLUMNS if column in found), None)
    groups: dict[str, list[Located]] = {}
    for location, row in rows:
        key = DEFAULT_SUBSET if subset_column is None else row.get(subset_column)
        if not isinstance(key, str) or not key.strip():
            raise DataValidationError(f"{location}: empty or missing {subset_column}")
        groups.setdefault(key, []).append((location, row))
    if subset is not None:
        if subset not in groups:
            raise UsageError(f"{name}: no subset {subset!r}; valid subsets: {', '.join(groups)}")
        groups = {subset: groups[subset]}
    stem = "stdin" if path == "-" else Path(_base_name(path)).stem
    return {
        key: _task(group, wanted, gold_base, stem if key == DEFAULT_SUBSET else f"{stem}/{key}")
        for key, group in groups.items()
    }
