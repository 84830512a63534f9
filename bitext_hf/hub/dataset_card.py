"""Mined bitexts as a Hugging Face dataset: a Parquet split, a dataset card (``huggingface_hub.DatasetCard``) with the
mining parameters, counts and the score histogram, ready to upload as one folder.

Where the parameters come from: a JSON sidecar next to the pairs, ``<pairs file>.meta.json``, read by
:func:`read_sidecar`. ``bitext-hf mine`` writes it with the pairs (the text of its
:class:`~bitext_hf.data.pair_files.MiningRecord`), ``bitext-hf align`` with an alignment, and
:func:`write_mining_metadata` beside pairs written from Python; its keys are :data:`METADATA_KEYS` (``encoder``,
``margin``, ``k``, ``threshold``, ``src``, ``tgt``, ``command``, ``filters``..., all optional). What it does not say,
the card marks ``[More Information Needed]``; the counts and the histogram come from the pairs themselves.

The folder (:func:`prepare_dataset_folder`)::

    README.md                       the dataset card (YAML: languages, task, size, configs -> data/*.parquet)
    data/train-00000-of-00001.parquet   the pairs (score, src_index, tgt_index, src, tgt[, doc_id])
    score_histogram.png             the scores of the pairs, the threshold marked
    threshold.png                   with a threshold report beside the pairs (``--threshold-report``): the scores
                                    of every candidate, the threshold marked (its sample of pairs is in the card)
    mining.json                     the sidecar, as read

``datasets.load_dataset("org/name")`` (or the folder) gives the ``train`` split.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# The pair files' formats (pairs table, sidecar, threshold report) live in the data layer, which the jobs write with.
from bitext_hf.data.pair_files import (
    MAX_SIDECAR_BYTES,
    METADATA_KEYS,
    MiningRecord,
    metadata_path,
    printable,
    threshold_report_paths,
)
from bitext_hf.errors import DataValidationError
from bitext_hf.hub.alignment_card import alignment_metadata, is_alignment, render_alignment_card
from bitext_hf.io import MAX_INPUT_BYTES_ENV, atomic_output, max_input_bytes
from bitext_hf.io.small_files import SmallFileError, read_regular_file, regular_file_status
from bitext_hf.io.terminal import escape_controls

__all__ = [
    "METADATA_KEYS",
    "ThresholdReport",
    "metadata_path",
    "pairs_preview",
    "prepare_dataset_folder",
    "read_pairs_table",
    "read_sidecar",
    "read_sidecar_of",
    "read_threshold_report",
    "render_dataset_card",
    "write_mining_metadata",
]

REQUIRED_COLUMNS = ("score", "src", "tgt")
# The numeric columns the card summarizes (the score's statistics and histogram, the distinct lines and documents):
# a NaN, an infinity or an empty cell in one of them would publish statistics of nan.
SUMMARIZED_COLUMNS = ("score", "src_index", "tgt_index", "doc_id")
DATA_FILE = "data/train-00000-of-00001.parquet"
_MISSING = "[More Information Needed]"
# The threshold report beside the pairs (``--threshold-report``): a Markdown sample of 20 pairs and a figure. Far
# larger is not one that mine wrote.
MAX_REPORT_SAMPLE_BYTES = MAX_SIDECAR_BYTES
MAX_REPORT_FIGURE_BYTES = 32 << 20

_TEMPLATE = """---
{{ card_data }}
---

# {{ pretty_name }}

Sentence pairs mined from monolingual text with [bitext-hf](https://github.com/bitext-hf/bitext-hf): both sides
encoded into one multilingual embedding space, candidates found by k-nearest-neighbour search in both directions,
scored with the margin criterion of Artetxe & Schwenk (2019) and kept by the retrieval mode and the threshold below.
The pairs are machine-mined, not human-verified: expect some noise, most of it among the lowest scores.

## Mining

| parameter | value |
|---|---|
| encoder | {{ encoder }} |
| margin | {{ margin }} |
| retrieval mode | {{ mode }} |
| k (neighbours averaged by the margin) | {{ k }} |
| threshold | {{ threshold }} |{% if quality %}
| pair quality | {{ quality }} |{% endif %}
| neighbour search | {{ index }} |
| languages | {{ languages }} |
| source text | {{ src }} |
| target text | {{ tgt }} |

## Counts

{{ counts }}

![Score histogram](score_histogram.png)

*{{ histogram_caption }}*
{% if filters %}
## Filters

{{ filters }}
{% endif %}{% if review %}
## Review

{{ review }}
{% endif %}{% if threshold_sample %}
## Choosing the threshold

![Candidate scores and the threshold](threshold.png)

{{ threshold_sample }}
{% endif %}
## Columns

* `score`: the margin score of the pair (higher is more likely a translation);
* `src_index`, `tgt_index`: 0-based line numbers of the sentences in the source and target text;
* `src`, `tgt`: the sentences;{% if doc_id %}
* `doc_id`: the document both sentences come from (mining inside aligned documents);{% endif %}

## Use

```python
from datasets import load_dataset

pairs = load_dataset("{{ repo_id }}", split="train")
better_half = pairs.filter(lambda row: row["score"] >= {{ median }})  # a stricter threshold: fewer, cleaner pairs
```

## How to reproduce

```bash
{{ command }}
```

The parameters above are in `mining.json`.
"""


def write_mining_metadata(pairs_path: str | os.PathLike, metadata: Mapping[str, Any] | MiningRecord) -> Path:
    """Write the sidecar of pairs written from Python (``bitext-hf mine`` writes its own, with the pairs): ``metadata``
    is a :class:`~bitext_hf.data.pair_files.MiningRecord` or a mapping of its keys (an unknown key is a ``ValueError``
    naming the known ones; None values are left out), e.g. ``command=shlex.join(["bitext-hf", *argv])``, which the
    dataset card quotes as the way to reproduce the run. The text is the record's, as mine writes it
    (:meth:`MiningRecord.to_json`), written atomically."""
    path = metadata_path(pairs_path)
    record = metadata if isinstance(metadata, MiningRecord) else MiningRecord.from_mapping(metadata)
    text = record.to_json()
    with atomic_output(path, follow_symlinks=False) as handle:
        handle.write(text)
    return path


def _file_error(path: str | os.PathLike, error: OSError | SmallFileError) -> DataValidationError:
    shown = escape_controls(os.fspath(path))
    if isinstance(error, FileNotFoundError):
        return DataValidationError(f"{shown}: no such file")
    if isinstance(error, SmallFileError):
        return DataValidationError(f"{shown}: {error}")
    if isinstance(error, PermissionError):
        return DataValidationError(f"{shown}: permission denied")
    return DataValidationError(f"{shown}: cannot be read ({error.strerror or error})")


def _status(path: str | os.PathLike) -> os.stat_result:
    """The status of the regular file ``path``, never opened; ``DataValidationError`` naming it and what it is when
    it is missing, a link to nothing, a FIFO, a device or a folder."""
    try:
        return regular_file_status(path)
    except (OSError, SmallFileError) as error:
        raise _file_error(path, error) from None


def _read_file(path: str | os.PathLike, max_bytes: int) -> bytes:
    """The bytes of the regular file ``path``, at most ``max_bytes``: refused (``DataValidationError`` naming it and
    what it is) when it is missing (or went away), a link to nothing, a FIFO, a device or a folder (never opened),
    larger (measured before a byte is read), or unreadable."""
    try:
        return read_regular_file(path, max_bytes)
    except (OSError, SmallFileError) as error:
        raise _file_error(path, error) from None


def _non_finite(value: Any, key: str) -> str | None:
    """The key path of the first number in ``value`` that is NaN or infinite (JSON's ``NaN``, ``Infinity``, or
    ``1e999``, which Python reads as infinity), with that number: ``threshold is nan``."""
    if isinstance(value, float) and not math.isfinite(value):
        return f"{key} is {value}"
    if isinstance(value, Mapping):
        items = value.items()
    elif isinstance(value, list):
        items = ((str(index), item) for index, item in enumerate(value))
    else:
        return None
    for name, item in items:
        found = _non_finite(item, f"{key}.{name}" if key else str(name))
        if found:
            return found
    return None


def read_sidecar(path: str | os.PathLike) -> dict[str, Any]:
    """The sidecar beside a pairs file, its known keys: a mining run's (:data:`METADATA_KEYS`, the fields of
    :class:`~bitext_hf.data.pair_files.MiningRecord`) or an alignment's (``bitext-hf align``: its ``task`` says so). Read once, bounded (:data:`MAX_SIDECAR_BYTES`, measured before it is read; a FIFO or a device is
    refused unopened).

    Raises:
        DataValidationError: naming the file: not a regular file, too large, not a JSON object, a number that is NaN
            or infinite (the card would publish it).
    """
    shown = escape_controls(os.fspath(path))
    data = _read_file(path, MAX_SIDECAR_BYTES)
    try:
        record = json.loads(data)
    except (ValueError, RecursionError) as error:  # not UTF-8, not JSON, nested too deep
        raise DataValidationError(f"{shown}: not a readable mining metadata file ({error})") from None
    if not isinstance(record, dict):
        raise DataValidationError(f"{shown}: mining metadata must be a JSON object, got {type(record).__name__}")
    metadata = (
        alignment_metadata(record)
        if is_alignment(record)
        else {key: record[key] for key in METADATA_KEYS if key in record}
    )
    bad = _non_finite(metadata, "")
    if bad:
        raise DataValidationError(f"{shown}: {bad}; the card states finite numbers only (mine writes no NaN)")
    return metadata


def read_sidecar_of(pairs_path: str | os.PathLike) -> dict[str, Any]:
    """The sidecar of ``pairs_path`` (:func:`metadata_path`) when there is one, else ``{}``; something there that
    is not a readable sidecar (a FIFO, a folder, a link to nothing, a huge file) is refused as :func:`read_sidecar`
    says, never taken for "no metadata"."""
    sidecar = metadata_path(pairs_path)
    return read_sidecar(sidecar) if os.path.lexists(sidecar) else {}


@dataclass(frozen=True)
class ThresholdReport:
    """The threshold report beside a pairs file (``--threshold-report``), as read: the figure's bytes and the
    Markdown sample (its own link to the figure removed: the card shows the figure once)."""

    figure: bytes
    sample: str


def read_threshold_report(pairs_path: str | os.PathLike) -> ThresholdReport | None:
    """The threshold report of ``pairs_path`` when both of its files lie beside it (else None), read bounded
    (:data:`MAX_REPORT_FIGURE_BYTES`, :data:`MAX_REPORT_SAMPLE_BYTES`; a FIFO or a device is refused unopened).

    Raises:
        DataValidationError: naming the file: not a regular file, too large, the sample not UTF-8.
    """
    figure_path, sample_path = threshold_report_paths(pairs_path)
    if not (os.path.lexists(figure_path) and os.path.lexists(sample_path)):
        return None
    figure = _read_file(figure_path, MAX_REPORT_FIGURE_BYTES)
    data = _read_file(sample_path, MAX_REPORT_SAMPLE_BYTES)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data[: error.start].count(b"\n") + 1
        raise DataValidationError(
            f"{escape_controls(os.fspath(sample_path))}:{line}: invalid UTF-8 (byte 0x{data[error.start]:02x})"
        ) from None
    sample = "\n".join(line for line in text.splitlines() if f"]({figure_path.name})" not in line)
    return ThresholdReport(figure, sample)


def _line_of_row(data: bytes, row: int, header: bool) -> int:
    """The line number of row ``row`` (0-based) of a text table whose rows are its non-blank lines (pyarrow skips
    blank ones; none of the package's pairs formats breaks a row over lines), after one header line if ``header``."""
    wanted, seen, number, start = row + int(header), -1, 0, 0
    while start <= len(data):
        end = data.find(b"\n", start)
        end = len(data) if end < 0 else end
        number += 1
        if data[start:end].strip():
            seen += 1
            if seen == wanted:
                return number
        start = end + 1
    return number


def _check_summarized_columns(table: Any, path: Path, data: bytes) -> None:
    """Refuse a value the card would summarize as nan: an empty cell, a NaN or an infinity in a numeric column among
    :data:`SUMMARIZED_COLUMNS`, and a score column that holds no numbers, naming the file and the line (the row of a
    Parquet file)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    shown = escape_controls(os.fspath(path))
    suffix = path.suffix.lower()
    for name in SUMMARIZED_COLUMNS:
        if name not in table.column_names:
            continue
        column = table.column(name)
        kind = column.type
        numeric = pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_decimal(kind)
        if not numeric and not pa.types.is_null(kind):  # null: every cell empty
            if name == "score":
                raise DataValidationError(f"{shown}: the score column holds {kind} values, not numbers")
            continue  # a document id may be text
        values = np.asarray(pc.cast(column, pa.float64()).to_numpy(zero_copy_only=False), dtype=np.float64)
        bad = np.flatnonzero(~np.isfinite(values))
        if not len(bad):
            continue
        row = int(bad[0])
        what = "empty" if not column[row].is_valid else f"{values[row]}"
        if suffix in (".parquet", ".pq"):
            place = f"{shown}: row {row + 1}"
        else:
            place = f"{shown}:{_line_of_row(data, row, header=suffix != '.jsonl')}"
        more = f" ({len(bad):,} such rows)" if len(bad) > 1 else ""
        raise DataValidationError(
            f"{place}: {name} is {what}{more}; the card summarizes this column, so every value must be a finite number"
        )


def read_pairs_table(path: str | os.PathLike, *, max_bytes: int | None = None):
    """The pairs written by ``bitext-hf mine`` / ``score`` (.parquet, .jsonl, .csv, .tsv) as a ``pyarrow.Table``.

    The file is read once, bounded: at most ``max_bytes`` (default: the input bound,
    :func:`bitext_hf.io.max_input_bytes`), measured before a byte is read; a FIFO or a device is refused unopened.

    Raises:
        DataValidationError: the file is missing, not a regular file, larger than the bound, cannot be read in its
            format, is empty, lacks a column of ``score src tgt``, or holds an empty, NaN or infinite value in a
            column the card summarizes (:data:`SUMMARIZED_COLUMNS`; the file and line named).
    """
    import pyarrow as pa
    import pyarrow.csv as pa_csv
    import pyarrow.json as pa_json
    import pyarrow.parquet as pq

    path = Path(path)
    shown = escape_controls(os.fspath(path))
    suffix = path.suffix.lower()
    size = _status(path).st_size  # cheapest first, and nothing opened: what is there, its format, its size
    if suffix not in (".parquet", ".pq", ".jsonl", ".csv", ".tsv", ".txt"):
        raise DataValidationError(f"{shown}: unknown pairs format {suffix!r} (.parquet, .jsonl, .csv or .tsv)")
    bound = max_input_bytes() if max_bytes is None else max_bytes
    if size > bound:
        raise DataValidationError(
            f"{shown}: holds {size:,} bytes, more than the input bound of {bound:,} bytes; raise it with "
            f"{MAX_INPUT_BYTES_ENV} if these pairs are meant to be that large"
        )
    data = _read_file(path, bound)  # bounded again while reading: the file may have grown since
    try:
        if suffix in (".parquet", ".pq"):
            table = pq.read_table(pa.BufferReader(data))
        elif suffix == ".jsonl":
            table = pa_json.read_json(pa.BufferReader(data))
        else:
            # The sentences are text whatever they look like ("42", "NA"), and only an empty cell is missing: "nan"
            # is NaN, which is refused below, not an empty value published as such.
            convert = pa_csv.ConvertOptions(
                column_types={"src": pa.string(), "tgt": pa.string()}, null_values=[""], strings_can_be_null=False
            )
            # mine's TSV has no quoting (a sentence with a tab is refused), so quotes are text.
            parse = (
                pa_csv.ParseOptions() if suffix == ".csv" else pa_csv.ParseOptions(delimiter="\t", quote_char=False)
            )
            table = pa_csv.read_csv(pa.BufferReader(data), parse_options=parse, convert_options=convert)
    except (OSError, pa.ArrowException) as error:
        message = escape_controls(" ".join(str(error).split()))
        raise DataValidationError(f"{shown}: cannot read the pairs ({message})") from error
    missing = [column for column in REQUIRED_COLUMNS if column not in table.column_names]
    if missing:
        raise DataValidationError(
            f"{shown}: not a file of mined pairs: no column {', '.join(missing)} "
            f"(it has {escape_controls(', '.join(map(str, table.column_names)))})"
        )
    if table.num_rows == 0:
        raise DataValidationError(f"{shown}: no pairs to publish")
    _check_summarized_columns(table, path, data)
    return table


def pairs_preview(table: Any, path: str | os.PathLike, *, rows: int = 5, width: int = 40) -> str:
    """What ``push --pairs --dry-run`` shows of the pairs ``table`` read from ``path``: the row count, the columns
    and the first ``rows`` rows as a text table (pandas' ``to_string``), each text cut to ``width`` characters. Every
    control character of the data, the column names and the path (a terminal escape sequence, a tab, a line break,
    a bidirectional override) is shown escaped (:func:`bitext_hf.io.terminal.escape_controls`), never sent to the
    terminal, so that a row stays one line and the terminal does nothing the data asks."""
    first = table.slice(0, rows).to_pylist()

    def shown(value: Any) -> Any:
        if value is None or isinstance(value, (bool, int, float)):
            return value
        text = escape_controls(value if isinstance(value, str) else str(value))
        return text if len(text) <= width else text[: width - 3] + "..."

    import pandas as pd

    names = [escape_controls(str(name)) for name in table.column_names]
    frame = pd.DataFrame([[shown(value) for value in row.values()] for row in first], columns=names)
    header = (
        f"{escape_controls(os.fspath(path))}: {table.num_rows:,} rows, {table.num_columns} columns: {', '.join(names)}"
    )
    return f"{header}\nfirst {len(first)} rows:\n{frame.to_string(index=False)}"


def _size_category(count: int) -> str:
    # The Hub's size_categories values.
    for limit, name in ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"), (1_000_000, "100K<n<1M")):
        if count < limit:
            return name
    return "1M<n<10M" if count < 10_000_000 else "10M<n<100M"


def _counts(table: Any, metadata: Mapping[str, Any]) -> str:
    import numpy as np

    scores = np.asarray(table.column("score").to_numpy(zero_copy_only=False), dtype=np.float64)
    searched = [metadata.get(key) for key in ("src_sentences", "tgt_sentences")]
    rows = [
        ("sentences searched (source x target)", " x ".join(f"{count:,}" for count in searched))
        if all(isinstance(count, int) for count in searched)
        else None,
        ("pairs", f"{table.num_rows:,}"),
        ("distinct source lines", f"{len(set(table.column('src_index').to_pylist())):,}")
        if "src_index" in table.column_names
        else None,
        ("distinct target lines", f"{len(set(table.column('tgt_index').to_pylist())):,}")
        if "tgt_index" in table.column_names
        else None,
        ("documents", f"{len(set(table.column('doc_id').to_pylist())):,}") if "doc_id" in table.column_names else None,
        ("score: min / median / max", f"{scores.min():.4f} / {float(np.median(scores)):.4f} / {scores.max():.4f}"),
    ]
    lines = ["| count | value |", "|---|---|"]
    lines += [f"| {name} | {value} |" for name, value in (row for row in rows if row is not None)]
    return "\n".join(lines)


def _quality(metadata: Mapping[str, Any]) -> str:
    """What the sidecar says of the pairs' quality (``mine --classifier`` / ``--min-precision``), for the card: the
    classifier, the estimated precision of the pairs and, with --min-precision, that the threshold was chosen for it."""
    classifier, estimate = metadata.get("classifier"), metadata.get("estimated_precision")
    if not classifier:
        return ""
    text = f"`quality` column by the classifier `{classifier}`"
    if isinstance(estimate, (int, float)):
        text += f"; estimated precision of these pairs (their mean quality) {estimate:.3f}"
    if metadata.get("min_precision") is not None:
        text += f", the threshold chosen for at least {metadata['min_precision']}"
    return text + ' (an estimate: see bitext-hf\'s benchmarks, "Pair quality")'


def _filters(metadata: Mapping[str, Any]) -> str:
    """The filters of the sidecar (settings and what each removed) as a Markdown table; empty without filters."""
    filters = metadata.get("filters")
    if not isinstance(filters, Mapping):
        return ""
    lines = ["| filter | setting or lines/pairs removed |", "|---|---|"]
    for name, value in (filters.get("settings") or {}).items():
        shown = ", ".join(f"{key} {item}" for key, item in value.items()) if isinstance(value, Mapping) else value
        lines.append(f"| {name} | {printable(str(shown))} |")
    for name, count in (filters.get("removed") or {}).items():
        lines.append(
            f"| removed: {name} | {count:,} |" if isinstance(count, int) else f"| removed: {name} | {count} |"
        )
    return "\n".join(lines)


def _review(metadata: Mapping[str, Any]) -> str:
    """What a review in ``bitext-hf app`` kept (the sidecar's ``review``), one sentence; empty without one."""
    review = metadata.get("review")
    if not isinstance(review, Mapping) or not all(isinstance(review.get(key), int) for key in ("pairs", "kept")):
        return ""
    text = f"Reviewed with `bitext-hf app`: {review['kept']:,} of {review['pairs']:,} pairs kept"
    if isinstance(review.get("rejected"), int) and review["rejected"]:
        text += f" ({review['rejected']:,} rejected by hand)"
    filters = review.get("filters")
    if isinstance(filters, Mapping):
        settings = [f"{name.replace('_', ' ')} {printable(str(value))}" for name, value in filters.items()]
        if settings:
            text += "; filters: " + ", ".join(settings)
    return text + "."


def render_dataset_card(
    table: Any,
    metadata: Mapping[str, Any],
    *,
    repo_id: str,
    histogram_caption: str,
    languages: Sequence[str] | None = None,
    license: str | None = None,
    threshold_sample: str | None = None,
) -> str:
    """The README.md of a mined dataset: metadata (languages, task, size, the data files), parameters, counts,
    the histogram, the filters, the threshold report (``threshold_sample``: the Markdown written beside the pairs
    by ``--threshold-report``; the card shows ``threshold.png``) and the command that reproduces the run."""
    import numpy as np
    from huggingface_hub import DatasetCard, DatasetCardData

    languages = list(languages or [metadata[key] for key in ("src_lang", "tgt_lang") if metadata.get(key)])
    pair = "-".join(languages) if languages else "multilingual"
    fields = dict(
        language=languages or None,
        license=license,
        multilinguality="translation" if len(set(languages)) > 1 else None,
        size_categories=_size_category(table.num_rows),
        task_categories=["translation", "sentence-similarity"],
        tags=["bitext-mining", "bitext-hf", "parallel-corpus"],
        pretty_name=f"Mined bitext ({pair})",
        configs=[{"config_name": "default", "data_files": [{"split": "train", "path": "data/train-*.parquet"}]}],
    )
    if is_alignment(metadata):  # aligned documents (`bitext-hf align`): their own card, the same YAML fields
        return render_alignment_card(
            table,
            metadata,
            repo_id=repo_id,
            histogram_caption=histogram_caption,
            card_data=fields,
            languages=languages,
        )
    data = DatasetCardData(**fields)

    def value(key: str) -> Any:
        found = metadata.get(key)
        return _MISSING if found is None else found

    encoder = value("encoder")
    if metadata.get("src_model") or metadata.get("tgt_model"):
        encoder = f"source: {value('src_model')}, target: {value('tgt_model')}"
    card = DatasetCard.from_template(
        data,
        template_str=_TEMPLATE,
        encoder=f"`{encoder}`" if encoder != _MISSING else encoder,
        margin=value("margin"),
        mode=value("mode"),
        k=value("k"),
        threshold=value("threshold") if metadata.get("threshold") is not None else "none",
        quality=_quality(metadata),
        index=value("index"),
        languages=", ".join(languages) or _MISSING,
        src=value("src"),
        tgt=value("tgt"),
        counts=_counts(table, metadata),
        median=round(float(np.median(table.column("score").to_numpy(zero_copy_only=False))), 4),
        histogram_caption=histogram_caption,
        filters=_filters(metadata),
        review=_review(metadata),
        threshold_sample=threshold_sample or "",
        doc_id="doc_id" in table.column_names,
        repo_id=repo_id,
        command=metadata.get("command") or "# the command was not recorded (no .meta.json next to the pairs)",
    )
    text = str(card)
    return text if text.endswith("\n") else text + "\n"


_READ = object()  # prepare_dataset_folder's "not given": read it from beside the pairs


def prepare_dataset_folder(
    pairs_path: str | os.PathLike,
    folder: str | os.PathLike,
    *,
    repo_id: str,
    metadata: Mapping[str, Any] | None = None,
    languages: Sequence[str] | None = None,
    license: str | None = None,
    table: Any = None,
    threshold_report: ThresholdReport | object | None = _READ,
) -> Path:
    """Write the dataset folder of ``pairs_path`` (see the module docstring) into the empty ``folder``.

    ``metadata`` defaults to the sidecar (:func:`read_sidecar_of`) when there is one, else nothing is known;
    ``table`` is the pairs already read by :func:`read_pairs_table`, ``threshold_report`` the report read by
    :func:`read_threshold_report` (None: none); each is read here when not given.
    """
    import datasets
    import numpy as np

    from bitext_hf.hub.figures import score_histogram

    table = read_pairs_table(pairs_path) if table is None else table
    if metadata is None:
        metadata = read_sidecar_of(pairs_path)
    if threshold_report is _READ:
        threshold_report = read_threshold_report(pairs_path)
    folder = Path(folder)
    (folder / "data").mkdir(parents=True, exist_ok=True)
    # Written by datasets (its features go into the Parquet metadata), without its progress bar on stderr.
    bars_were_on = not datasets.utils.are_progress_bars_disabled()
    datasets.utils.disable_progress_bars()
    try:
        datasets.Dataset(table).to_parquet(str(folder / DATA_FILE))
    finally:
        if bars_were_on:
            datasets.utils.enable_progress_bars()
    scores = np.asarray(table.column("score").to_numpy(zero_copy_only=False), dtype=np.float64)
    threshold = metadata.get("threshold")
    figure = score_histogram(
        scores,
        folder / "score_histogram.png",
        threshold=float(threshold) if isinstance(threshold, (int, float)) else None,
        margin=str(metadata.get("margin") or "unknown"),
    )
    threshold_sample = None
    if threshold_report is not None:  # written beside the pairs by --threshold-report
        (folder / "threshold.png").write_bytes(threshold_report.figure)
        threshold_sample = threshold_report.sample
    card = render_dataset_card(
        table,
        metadata,
        repo_id=repo_id,
        histogram_caption=figure.caption,
        languages=languages,
        license=license,
        threshold_sample=threshold_sample,
    )
    (folder / "README.md").write_text(card, encoding="utf-8")
    settings = "alignment.json" if is_alignment(metadata) else "mining.json"
    (folder / settings).write_text(json.dumps(dict(metadata), indent=2, ensure_ascii=False) + "\n", "utf-8")
    return folder
