"""The sidecar of a mined pairs file, ``<pairs file>.meta.json``: the run's parameters, inputs, counts and command,
which ``bitext-hf push --pairs`` shows in the dataset card.

The format is one dataclass, :class:`MiningRecord`: its fields are the sidecar's keys, in the order they are
written (:data:`METADATA_KEYS`), so the writer, the reader and the mining job cannot name them differently. The
file is a JSON object of the fields that are not None, indented by 2, UTF-8, ending with a newline.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from bitext_hf.errors import DataValidationError
from bitext_hf.io.small_files import read_small_json

__all__ = [
    "MAX_SIDECAR_BYTES",
    "METADATA_KEYS",
    "MiningRecord",
    "metadata_path",
    "mining_metadata_json",
    "printable",
    "read_mining_metadata",
    "threshold_report_paths",
]


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


def mining_metadata_json(metadata: Mapping[str, Any] | MiningRecord) -> str:
    """The sidecar's text for ``metadata`` (a :class:`MiningRecord`, or a mapping of its keys; None values are left
    out), ready to write."""
    record = metadata if isinstance(metadata, MiningRecord) else MiningRecord.from_mapping(metadata)
    return record.to_json()


def read_mining_metadata(path: str | os.PathLike) -> dict[str, Any]:
    """The sidecar at ``path`` (its known keys); a data error naming the file when it is not a JSON object or holds
    more than :data:`MAX_SIDECAR_BYTES` (refused before it is read)."""
    try:
        record = read_small_json(path, MAX_SIDECAR_BYTES)
    except (OSError, ValueError, RecursionError) as error:  # RecursionError: JSON nested too deep
        raise DataValidationError(f"{path}: not a readable mining metadata file ({error})") from None
    if not isinstance(record, dict):
        raise DataValidationError(f"{path}: mining metadata must be a JSON object, got {type(record).__name__}")
    return {key: record[key] for key in METADATA_KEYS if key in record}
