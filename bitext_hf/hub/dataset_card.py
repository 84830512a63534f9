"""Mined bitexts as a Hugging Face dataset: a Parquet split, a dataset card (``huggingface_hub.DatasetCard``) with the
mining parameters, counts and the score histogram, ready to upload as one folder.

Where the parameters come from: a JSON sidecar next to the pairs, ``<pairs file>.meta.json`` (written by
:func:`write_mining_metadata`; keys ``encoder``, ``src_model``, ``tgt_model``, ``margin``, ``mode``, ``k``,
``threshold``, ``index``, ``src``, ``tgt``, ``src_lang``, ``tgt_lang``, ``src_sentences``, ``tgt_sentences``,
``command``, ``filters``, all optional). What it does not say, the card marks ``[More Information Needed]``; the counts and the
histogram come from the pairs themselves.

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
import os
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from bitext_hf.errors import DataValidationError
from bitext_hf.hub.alignment_card import alignment_metadata, is_alignment, render_alignment_card
from bitext_hf.io import atomic_output

# The sidecar's format lives with the mining job that writes it (mining is below hub); hub reads it from there.
from bitext_hf.mining.sidecar import (
    MAX_SIDECAR_BYTES,
    METADATA_KEYS,
    metadata_path,
    mining_metadata_json,
    printable,
    read_mining_metadata,
)
from bitext_hf.mining.threshold_report import threshold_report_paths

__all__ = [
    "METADATA_KEYS",
    "metadata_path",
    "mining_metadata_json",
    "pairs_preview",
    "prepare_dataset_folder",
    "read_mining_metadata",
    "read_pairs_table",
    "read_sidecar",
    "render_dataset_card",
    "write_mining_metadata",
]

REQUIRED_COLUMNS = ("score", "src", "tgt")
DATA_FILE = "data/train-00000-of-00001.parquet"
_MISSING = "[More Information Needed]"

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
| threshold | {{ threshold }} |
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


def write_mining_metadata(pairs_path: str | os.PathLike, metadata: Mapping[str, Any]) -> Path:
    """Write the sidecar of ``pairs_path`` (atomically) with the known keys of ``metadata`` (None values left out),
    e.g. ``command=shlex.join(["bitext-hf", *argv])``: the dataset card quotes it as the way to reproduce the run."""
    path = metadata_path(pairs_path)
    text = mining_metadata_json(metadata)
    with atomic_output(path, follow_symlinks=False) as handle:
        handle.write(text)
    return path


def read_sidecar(path: str | os.PathLike) -> dict[str, Any]:
    """The sidecar beside a pairs file, its known keys: a mining run's (:func:`read_mining_metadata`, which also
    refuses what is not one) or an alignment's (``bitext-hf align``: its ``task`` says so)."""
    from bitext_hf.io.small_files import read_small_json

    try:
        record = read_small_json(path, MAX_SIDECAR_BYTES)
    except (OSError, ValueError, RecursionError):
        record = None  # read_mining_metadata names the problem
    if isinstance(record, dict) and is_alignment(record):
        return alignment_metadata(record)
    return read_mining_metadata(path)


def read_pairs_table(path: str | os.PathLike):
    """The pairs written by ``bitext-hf mine`` / ``score`` (.parquet, .jsonl, .csv, .tsv) as a ``pyarrow.Table``.

    Raises:
        DataValidationError: the file cannot be read in its format, is empty, or lacks a column of
            ``score src tgt``.
    """
    import pyarrow as pa
    import pyarrow.csv as pa_csv
    import pyarrow.json as pa_json
    import pyarrow.parquet as pq

    path = Path(path)
    suffix = path.suffix.lower()
    try:
        if suffix in (".parquet", ".pq"):
            table = pq.read_table(path)
        elif suffix == ".jsonl":
            table = pa_json.read_json(path)
        elif suffix == ".csv":
            table = pa_csv.read_csv(path)
        elif suffix in (".tsv", ".txt"):
            # mine's TSV has no quoting (a sentence with a tab is refused), so quotes are text.
            table = pa_csv.read_csv(path, parse_options=pa_csv.ParseOptions(delimiter="\t", quote_char=False))
        else:
            raise DataValidationError(f"{path}: unknown pairs format {suffix!r} (.parquet, .jsonl, .csv or .tsv)")
    except (OSError, pa.ArrowException) as error:
        raise DataValidationError(f"{path}: cannot read the pairs ({' '.join(str(error).split())})") from error
    missing = [column for column in REQUIRED_COLUMNS if column not in table.column_names]
    if missing:
        raise DataValidationError(
            f"{path}: not a file of mined pairs: no column {', '.join(missing)} "
            f"(it has {', '.join(table.column_names)})"
        )
    if table.num_rows == 0:
        raise DataValidationError(f"{path}: no pairs to publish")
    return table


def pairs_preview(table: Any, path: str | os.PathLike, *, rows: int = 5, width: int = 40) -> str:
    """What ``push --pairs --dry-run`` shows of the pairs ``table`` read from ``path``: the row count, the columns
    and the first ``rows`` rows as a text table (pandas' ``to_string``), each text cut to ``width`` characters with
    its line breaks and tabs shown as spaces, so that a row stays one line."""
    first = table.slice(0, rows).to_pylist()

    def shown(value: Any) -> Any:
        if not isinstance(value, str):
            return value
        text = " ".join(printable(value).split())
        return text if len(text) <= width else text[: width - 3] + "..."

    import pandas as pd

    frame = pd.DataFrame(
        [{key: shown(value) for key, value in row.items()} for row in first], columns=table.column_names
    )
    header = (
        f"{printable(os.fspath(path))}: {table.num_rows:,} rows, {table.num_columns} columns: "
        f"{', '.join(table.column_names)}"
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
        index=value("index"),
        languages=", ".join(languages) or _MISSING,
        src=value("src"),
        tgt=value("tgt"),
        counts=_counts(table, metadata),
        median=round(float(np.median(table.column("score").to_numpy(zero_copy_only=False))), 4),
        histogram_caption=histogram_caption,
        filters=_filters(metadata),
        threshold_sample=threshold_sample or "",
        doc_id="doc_id" in table.column_names,
        repo_id=repo_id,
        command=metadata.get("command") or "# the command was not recorded (no .meta.json next to the pairs)",
    )
    text = str(card)
    return text if text.endswith("\n") else text + "\n"


def prepare_dataset_folder(
    pairs_path: str | os.PathLike,
    folder: str | os.PathLike,
    *,
    repo_id: str,
    metadata: Mapping[str, Any] | None = None,
    languages: Sequence[str] | None = None,
    license: str | None = None,
    table: Any = None,
) -> Path:
    """Write the dataset folder of ``pairs_path`` (see the module docstring) into the empty ``folder``.

    ``metadata`` defaults to the sidecar (:func:`metadata_path`) when it exists, else nothing is known; ``table``
    is the pairs already read by :func:`read_pairs_table` (read here when not given).
    """
    import datasets
    import numpy as np

    from bitext_hf.hub.figures import score_histogram

    table = read_pairs_table(pairs_path) if table is None else table
    if metadata is None:
        sidecar = metadata_path(pairs_path)
        metadata = read_sidecar(sidecar) if sidecar.is_file() else {}
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
    report_figure, report_sample = threshold_report_paths(pairs_path)
    if report_figure.is_file() and report_sample.is_file():  # written beside the pairs by --threshold-report
        shutil.copyfile(report_figure, folder / "threshold.png")
        text = report_sample.read_text(encoding="utf-8")  # its own link to the figure: the card has one already
        threshold_sample = "\n".join(line for line in text.splitlines() if f"]({report_figure.name})" not in line)
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
