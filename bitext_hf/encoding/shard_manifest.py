"""The manifest of a shard folder (``manifest.json``, and ``progress.json`` while shards are written): the count,
dimension, dtype and encoder of the embeddings, the SHA-256 of their text, and every shard with its rows, size and
SHA-256; read strictly, so that a tampered or foreign file is one line naming it (exit 3)."""

from __future__ import annotations

import json
import os
import re
from dataclasses import asdict, dataclass

from bitext_hf.data.hashing import text_sha256
from bitext_hf.errors import DataValidationError
from bitext_hf.io import atomic_output
from bitext_hf.io.small_files import SmallFileError, read_small_json

__all__ = [
    "DTYPES",
    "MANIFEST",
    "MAX_MANIFEST_BYTES",
    "PROGRESS",
    "SHARD_NAME",
    "Manifest",
    "ShardInfo",
    "manifest_error",
    "read_manifest",
    "text_sha256",
    "write_manifest",
]

MANIFEST = "manifest.json"
PROGRESS = "progress.json"
DTYPES = ("float32", "float16")
_FORMAT = "bitext-hf-embeddings"
_VERSION = 1
SHARD_NAME = re.compile(r"shard-\d{5,}\.npy")
# About 200 bytes a shard: 64 MiB is some 300,000 shards, 300 billion rows at the default shard size.
MAX_MANIFEST_BYTES = 64 << 20


@dataclass(frozen=True)
class ShardInfo:
    """One shard as the manifest records it: file name, rows, size in bytes and SHA-256 of the file."""

    name: str
    rows: int
    bytes: int
    sha256: str


@dataclass(frozen=True)
class Manifest:
    """What a shard folder holds. ``dimension`` is None in ``progress.json`` until the first shard is written."""

    count: int
    dimension: int | None
    dtype: str
    encoder: str | None
    text_sha256: str | None
    shard_size: int
    shards: tuple[ShardInfo, ...] = ()

    def settings(self) -> dict:
        """The fields a resumed run must share with the run it continues."""
        return {key: getattr(self, key) for key in ("count", "dtype", "encoder", "text_sha256", "shard_size")}

    def to_json(self) -> str:
        data = {"format": _FORMAT, "version": _VERSION, **asdict(self)}
        data["shards"] = [asdict(shard) for shard in self.shards]
        return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def manifest_error(path: str, what: str) -> DataValidationError:
    return DataValidationError(f"{path}: {what}; not a bitext-hf shard manifest (write one with `bitext-hf encode`)")


def read_manifest(path: str | os.PathLike) -> Manifest:
    """Parse ``manifest.json`` (or ``progress.json``); ``DataValidationError`` naming the file for anything else,
    a file of more than :data:`MAX_MANIFEST_BYTES` included (refused before it is read)."""
    path = os.fspath(path)
    try:
        data = read_small_json(path, MAX_MANIFEST_BYTES)
    except OSError as error:
        raise DataValidationError(f"{path}: cannot be read ({error.strerror})") from None
    except SmallFileError as error:
        raise manifest_error(path, str(error)) from None
    except (ValueError, RecursionError) as error:  # RecursionError: nested past the limit
        raise manifest_error(path, f"not valid JSON ({error})") from None
    if not isinstance(data, dict) or data.get("format") != _FORMAT:
        raise manifest_error(path, f'no "format": "{_FORMAT}"')
    if data.get("version") != _VERSION:
        raise DataValidationError(f"{path}: manifest version {data.get('version')!r}; this bitext-hf reads {_VERSION}")

    def integer(value, field: str, *, optional: bool = False, minimum: int = 1) -> int | None:
        if optional and value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise manifest_error(path, f"{field} must be an integer >= {minimum}, got {value!r}")
        return value

    def text(value, field: str, *, optional: bool = False) -> str | None:
        if (optional and value is None) or isinstance(value, str):
            return value
        raise manifest_error(path, f"{field} must be a string, got {value!r}")

    shards = data.get("shards")
    if not isinstance(shards, list) or not all(isinstance(shard, dict) for shard in shards):
        raise manifest_error(path, '"shards" must be a list of objects')
    infos = []
    for number, shard in enumerate(shards):
        name = text(shard.get("name"), f"shards[{number}].name")
        if not SHARD_NAME.fullmatch(name):  # also keeps a manifest from naming files outside its folder
            raise manifest_error(path, f"shards[{number}].name {name!r} is not a shard file name (shard-NNNNN.npy)")
        infos.append(
            ShardInfo(
                name,
                integer(shard.get("rows"), f"shards[{number}].rows"),
                integer(shard.get("bytes"), f"shards[{number}].bytes"),
                text(shard.get("sha256"), f"shards[{number}].sha256"),
            )
        )
    dtype = data.get("dtype")
    if dtype not in DTYPES:
        raise manifest_error(path, f"dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
    return Manifest(
        count=integer(data.get("count"), "count"),
        dimension=integer(data.get("dimension"), "dimension", optional=True),
        dtype=dtype,
        encoder=text(data.get("encoder"), "encoder", optional=True),
        text_sha256=text(data.get("text_sha256"), "text_sha256", optional=True),
        shard_size=integer(data.get("shard_size"), "shard_size"),
        shards=tuple(infos),
    )


def write_manifest(path: str, manifest: Manifest) -> None:
    with atomic_output(path, "w", follow_symlinks=False) as handle:
        handle.write(manifest.to_json())
