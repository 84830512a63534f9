"""Embeddings on disk: memory-mapped ``.npy`` shards with a manifest, written with resume and read block by block.

A shard folder holds ``shard-00000.npy``, ``shard-00001.npy``, ... (``shard_size`` rows each, the last one fewer;
float32 or float16) and ``manifest.json`` (count, dimension, dtype, encoder, SHA-256 of the text, every shard with
its rows, size and SHA-256). The manifest is written last, so a folder without one is never taken as complete.
While shards are written, ``progress.json`` records the run's settings and each finished shard: ``resume=True``
continues after the last shard that is recorded and intact, and the folder ends byte for byte as an uninterrupted
run leaves it (nothing written depends on when or how often the run was started).

:func:`open_shards` checks a folder against its manifest before any work (every shard present, of the recorded size,
header and checksum; rows finite and non-zero) and returns :class:`ShardedEmbeddings`, which reads rows by slices from
the memory-mapped shards, normalized exactly as :func:`bitext_hf.data.embeddings.check_embeddings` normalizes the concatenated
array. :func:`bitext_hf.mining.sharded.mine_shards` therefore returns the same pairs and scores as
:func:`bitext_hf.mining.mine` on the concatenation, holding only a block of each side and the top-k lists in memory.

The manifest is read and written in ``shard_manifest.py``; rows named for a distributed task to read itself
(:class:`RowRange`, from ``ShardedEmbeddings.row_range``) in ``shard_rows.py``. The encoding cache
(:class:`~bitext_hf.encoding.cache.EmbeddingCache`) lives in ``cache.py``.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import logging
import math
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import IO

import numpy as np

from bitext_hf.encoding.shard_manifest import (
    DTYPES,
    MANIFEST,
    PROGRESS,
    SHARD_NAME,
    Manifest,
    ShardInfo,
    manifest_error,
    read_manifest,
    text_sha256,
    write_manifest,
)
from bitext_hf.encoding.shard_rows import RowRange, as_checked, rows_across
from bitext_hf.errors import DataValidationError, UsageError
from bitext_hf.io import atomic_output, non_regular_kind, refuse_input

__all__ = [
    "DEFAULT_SHARD_SIZE",
    "MANIFEST",
    "PROGRESS",
    "Manifest",
    "RowRange",
    "ShardInfo",
    "ShardedEmbeddings",
    "check_shard_folder",
    "is_shard_folder",
    "open_shards",
    "read_manifest",
    "text_sha256",
    "write_shards",
]

logger = logging.getLogger("bitext_hf")

DEFAULT_SHARD_SIZE = 1_000_000
# Temp files of atomic_output (".NAME.bitext-hf-PID-TOKEN.tmp"): left by a killed run, removed by the next write.
_TEMP_NAME = re.compile(r"\..+\.bitext-hf-\d+-[0-9a-f]+\.tmp")
# Sentences per encoder call inside a shard: the progress bar moves within a shard and memory holds one shard. The
# split depends only on the shard, so a resumed run encodes exactly the batches an uninterrupted one does.
ENCODE_CHUNK = 16_384
_HASH_CHUNK = 1 << 24


def _file_sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(_HASH_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def is_shard_folder(path: str | os.PathLike) -> bool:
    """Whether an input path names embeddings in shards (a folder) rather than a file."""
    return os.path.isdir(path)


# ----------------------------------------------------------------------------------------------------- writing


def _folder_entries(folder: str) -> list[str]:
    try:
        return os.listdir(folder)
    except OSError as error:
        raise UsageError(f"--out {folder}: cannot be listed ({error.strerror})") from None


def check_shard_folder(folder: str, *, resume: bool = False) -> None:
    """Refuse an output folder before any reading or encoding (``UsageError``, exit 2): not a folder, a missing or
    read-only parent, a folder holding files that are not shards of bitext-hf, a complete encoding (without
    ``resume``), or an unfinished one without ``resume``."""
    if os.path.exists(folder) and not os.path.isdir(folder):
        raise UsageError(f"--out {folder}: exists and is not a folder; give a new or empty folder for shards")
    if not os.path.isdir(folder):
        parent = os.path.dirname(os.path.abspath(folder))
        if not os.path.isdir(parent):
            raise UsageError(f"--out {folder}: folder {parent} does not exist")
        if not os.access(parent, os.W_OK | os.X_OK):
            raise UsageError(f"--out {folder}: folder {parent} is not writable")
        return
    entries = _folder_entries(folder)
    foreign = sorted(e for e in entries if e not in (MANIFEST, PROGRESS) and not _is_own_file(e))
    if foreign:
        raise UsageError(
            f"--out {folder}: holds {foreign[0]!r}{f' and {len(foreign) - 1} more' if len(foreign) > 1 else ''}, "
            "which is not a shard of bitext-hf; give a new or empty folder"
        )
    # A link named like a shard would have a shard written through it (onto its target, an input perhaps), and a
    # FIFO would hang the check of an earlier shard: the folder holds regular files only, or nothing is done.
    for entry in sorted(entries):
        kind = non_regular_kind(os.path.join(folder, entry))
        if kind is not None:
            raise UsageError(f"--out {folder}: {entry} is {kind}; a shard folder holds regular files only")
        refuse_input(os.path.join(folder, entry), entry, f"--out {folder}:")  # a hard link of an input
    if not os.access(folder, os.W_OK | os.X_OK):
        raise UsageError(f"--out {folder}: folder is not writable")
    if MANIFEST in entries and not resume:
        raise UsageError(f"--out {folder}: holds a complete encoding already; give a new or empty folder")
    if PROGRESS in entries and MANIFEST not in entries and not resume:
        raise UsageError(
            f"--out {folder}: holds an unfinished encoding; add --resume to continue it, or give a new or empty folder"
        )


def _is_own_file(name: str) -> bool:
    return bool(SHARD_NAME.fullmatch(name) or _TEMP_NAME.fullmatch(name))


def _shard_name(number: int) -> str:
    return f"shard-{number:05d}.npy"


class _HashingWriter:
    """Passes writes on to a file and hashes them: np.save sees a non-file object and writes in chunks, so the
    checksum costs no second read of the shard and no copy of it in memory."""

    def __init__(self, handle: IO[bytes]) -> None:
        self.handle = handle
        self.digest = hashlib.sha256()
        self.size = 0

    def write(self, data) -> int:
        self.digest.update(data)
        self.size += len(memoryview(data).cast("B"))
        return self.handle.write(data)


def _save_shard(path: str, array: np.ndarray) -> tuple[int, str]:
    with atomic_output(path, "wb", follow_symlinks=False) as handle:
        writer = _HashingWriter(handle)
        np.save(writer, array, allow_pickle=False)
    return writer.size, writer.digest.hexdigest()


def _intact_prefix(folder: str, recorded: Sequence[ShardInfo]) -> list[ShardInfo]:
    """The recorded shards, in order, up to the first that is missing or differs from its record."""
    intact = []
    for shard in recorded:
        path = os.path.join(folder, shard.name)
        try:
            same = os.path.getsize(path) == shard.bytes and _file_sha256(path) == shard.sha256
        except OSError:
            same = False
        if not same:
            logger.warning("%s: missing or changed since it was recorded; encoding again from there", path)
            break
        intact.append(shard)
    return intact


def _differences(settings: dict, recorded: dict) -> str:
    changed = [key for key in settings if settings[key] != recorded[key]]
    return ", ".join(f"{key} {recorded[key]!r} there, {settings[key]!r} now" for key in changed)


def write_shards(
    folder: str | os.PathLike,
    texts: Sequence[str],
    encode: Callable[[list[str]], np.ndarray],
    *,
    encoder: str | None,
    shard_size: int = DEFAULT_SHARD_SIZE,
    dtype: str = "float32",
    resume: bool = False,
    show_progress: bool = False,
    embeddings: np.ndarray | None = None,
) -> tuple[Manifest, int]:
    """Encode ``texts`` shard by shard into ``folder`` (see the module docstring).

    Args:
        encode: sentences -> float32 (n, d) embeddings (an encoder's ``encode``).
        embeddings: all of ``texts``' float32 embeddings, already computed (the encoding cache): the shards are
            cut from them and ``encode`` is never called. The folder is byte for byte the one ``encode`` would
            give when the encoder's vector of a sentence does not depend on the other sentences of its batch
            (padding can change the last bits).
        encoder: how the manifest names the encoder (checked on resume).
        shard_size: rows per shard.
        dtype: "float32" or "float16" (half the disk and memory-map size; rows are renormalized when read).
        resume: continue an unfinished run in ``folder``; a complete one with the same settings is left as it is.

    Returns:
        (the manifest, how many sentences were encoded by this call).

    Raises:
        UsageError: see :func:`check_shard_folder`; a folder whose unfinished run had other settings.
    """
    folder = os.fspath(folder)
    if dtype not in DTYPES:
        raise UsageError(f"dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
    if isinstance(shard_size, bool) or not isinstance(shard_size, int) or shard_size < 1:
        raise UsageError(f"shard size must be an integer >= 1, got {shard_size!r}")
    if not texts:
        raise DataValidationError("no sentences to encode")
    check_shard_folder(folder, resume=resume)
    created = False
    if not os.path.isdir(folder):
        with contextlib.suppress(FileExistsError):  # another run may create it at the same moment
            os.mkdir(folder)
            created = True
    lock = _lock_folder(folder)
    try:
        return _write_shards_locked(
            folder,
            texts,
            encode,
            created=created,
            encoder=encoder,
            shard_size=shard_size,
            dtype=dtype,
            resume=resume,
            show_progress=show_progress,
            embeddings=embeddings,
        )
    finally:
        os.close(lock)


def _lock_folder(folder: str) -> int:
    """An exclusive lock on the shard folder itself, held until the returned descriptor is closed (by the kernel
    when the process dies): two runs writing one folder would interleave shards and progress records."""
    descriptor = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0))
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(descriptor)
        raise UsageError(
            f"--out {folder}: another bitext-hf run is writing into this folder; wait for it to end (then add "
            "--resume if it was cut short) or give another folder"
        ) from None
    return descriptor


def _write_shards_locked(
    folder: str,
    texts: Sequence[str],
    encode: Callable[[list[str]], np.ndarray],
    *,
    created: bool,
    encoder: str | None,
    shard_size: int,
    dtype: str,
    resume: bool,
    show_progress: bool,
    embeddings: np.ndarray | None,
) -> tuple[Manifest, int]:
    check_shard_folder(folder, resume=resume)  # again under the lock: a run that held it may have finished
    plan = Manifest(len(texts), None, dtype, encoder, text_sha256(texts), shard_size)
    done: list[ShardInfo] = []
    dimension = None
    for name in (MANIFEST, PROGRESS) if resume else ():
        path = os.path.join(folder, name)
        if not os.path.exists(path):
            continue
        recorded = read_manifest(path)
        if recorded.settings() != plan.settings():
            changed = _differences(plan.settings(), recorded.settings())
            raise UsageError(
                f"--out {folder}: its encoding was made with other settings ({changed}); give a new folder"
            )
        if name == MANIFEST:
            logger.info("%s: complete already, nothing to encode", folder)
            return open_shards(folder).manifest, 0
        done, dimension = _intact_prefix(folder, recorded.shards), recorded.dimension
        break
    progress = os.path.join(folder, PROGRESS)
    n_shards = math.ceil(len(texts) / shard_size)
    encoded = 0
    from tqdm.auto import tqdm

    bar = tqdm(
        total=len(texts),
        initial=len(done) * shard_size,
        unit="sentence",
        desc="encoding shards",
        disable=not show_progress,
    )
    try:
        write_manifest(progress, replace(plan, dimension=dimension, shards=tuple(done)))
        for number in range(len(done), n_shards):
            chunk = list(texts[number * shard_size : (number + 1) * shard_size])
            array = None
            for start in range(0, len(chunk), ENCODE_CHUNK):
                if embeddings is None:
                    part = np.asarray(encode(chunk[start : start + ENCODE_CHUNK]))
                else:
                    offset = number * shard_size + start
                    part = embeddings[offset : offset + len(chunk[start : start + ENCODE_CHUNK])]
                if part.ndim != 2 or part.shape[0] != len(chunk[start : start + ENCODE_CHUNK]):
                    raise ValueError(f"the encoder returned shape {part.shape} for {len(chunk)} sentences")
                if array is None:
                    dimension = dimension or part.shape[1]
                    array = np.empty((len(chunk), dimension), dtype=dtype)
                if part.shape[1] != dimension:
                    raise DataValidationError(
                        f"--out {folder}: the encoder gives dimension {part.shape[1]} but the shards written "
                        f"before have {dimension}"
                    )
                array[start : start + part.shape[0]] = part
                encoded += part.shape[0] if embeddings is None else 0
                bar.update(part.shape[0])
            name = _shard_name(number)
            size, digest = _save_shard(os.path.join(folder, name), array)
            done.append(ShardInfo(name, len(chunk), size, digest))
            del array  # one shard in memory at a time
            write_manifest(progress, replace(plan, dimension=dimension, shards=tuple(done)))
    except BaseException as error:
        if created and not done:  # nothing worth resuming: leave no trace of this run
            with contextlib.suppress(OSError):
                os.unlink(progress)
                os.rmdir(folder)
        elif done:  # a note, not a log line: the command line reports the error and this as one line
            error.add_note(
                f"{len(done)} of {n_shards} shards in {folder} are complete: run the same command with --resume to "
                "continue"
            )
        raise
    finally:
        bar.close()
    manifest = replace(plan, dimension=dimension, shards=tuple(done))
    write_manifest(os.path.join(folder, MANIFEST), manifest)
    os.unlink(progress)
    return manifest, encoded


# ----------------------------------------------------------------------------------------------------- reading


class ShardedEmbeddings:
    """The rows of a shard folder as one (count, dimension) float32 matrix, read on demand (see :func:`open_shards`).

    ``self[a:b]`` reads rows ``a`` to ``b`` from the memory-mapped shards (a block may span shards) and returns them
    as float32, normalized as :func:`bitext_hf.data.embeddings.check_embeddings` normalizes the whole concatenation (all rows,
    or none when every row is unit length already). ``self[rows]`` with an array of row numbers returns a view of
    those rows (nothing is read); ``np.asarray(self)`` reads everything.
    """

    def __init__(
        self,
        folder: str,
        manifest: Manifest,
        arrays: Sequence[np.ndarray],
        norms: np.ndarray,
        normalize: bool,
        rows: np.ndarray | None = None,
    ) -> None:
        self.folder = folder
        self.manifest = manifest
        self._arrays = list(arrays)
        self._starts = np.cumsum([0] + [array.shape[0] for array in arrays])
        self._norms = norms
        self._normalize = normalize
        self._rows = rows
        self.shape = (manifest.count if rows is None else len(rows), manifest.dimension)
        self.dtype = np.dtype(np.float32)
        self.ndim = 2

    def __len__(self) -> int:
        return self.shape[0]

    def __repr__(self) -> str:
        return f"ShardedEmbeddings({self.folder!r}, shape={self.shape}, stored as {self.manifest.dtype})"

    def __getitem__(self, key) -> np.ndarray | ShardedEmbeddings:
        if isinstance(key, slice):
            start, stop, step = key.indices(len(self))
            if step == 1 and self._rows is None:
                return self._contiguous(start, stop)
            return self._gather(self._global_rows(np.arange(start, stop, step)))
        rows = np.asarray(key)
        if rows.dtype == bool and rows.shape == (len(self),):
            rows = np.flatnonzero(rows)
        if rows.ndim != 1 or rows.dtype.kind not in "iu":
            raise TypeError(f"index shards with a slice or a 1-D array of row numbers, not {key!r}")
        if rows.size and (rows.min() < -len(self) or rows.max() >= len(self)):
            raise IndexError(f"row numbers out of range for {len(self)} rows")
        rows = np.where(rows < 0, rows + len(self), rows).astype(np.int64)
        if self._rows is None and rows.size == len(self) and np.array_equal(rows, np.arange(len(self))):
            return self  # every row in order (mine's de-duplication when nothing repeats): keep reading by slices
        return ShardedEmbeddings(
            self.folder, self.manifest, self._arrays, self._norms, self._normalize, self._global_rows(rows)
        )

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        rows = self[0 : len(self)]
        return rows if dtype is None else rows.astype(dtype, copy=False)

    def _global_rows(self, rows: np.ndarray) -> np.ndarray:
        return rows if self._rows is None else self._rows[rows]

    def _convert(self, block: np.ndarray, norms: np.ndarray) -> np.ndarray:
        return as_checked(block, norms, self._normalize)

    def row_range(self, start: int, stop: int) -> RowRange | None:
        """Rows ``start`` to ``stop`` as a :class:`RowRange` to read elsewhere (None for a selection of rows)."""
        if self._rows is not None:
            return None
        start, stop, _ = slice(start, stop).indices(len(self))
        first = int(np.searchsorted(self._starts, start, side="right")) - 1
        last = max(first, int(np.searchsorted(self._starts, stop, side="left")) - 1)
        shards = self.manifest.shards[first : last + 1]
        return RowRange(
            self.folder,
            tuple((shard.name, shard.bytes) for shard in shards),
            start - int(self._starts[first]),
            stop - start,
            self.manifest.dimension,
            str(self.manifest.dtype),
            self._norms[start:stop],
            self._normalize,
        )

    def _contiguous(self, start: int, stop: int) -> np.ndarray:
        if start >= stop:
            return np.empty((0, self.shape[1]), dtype=np.float32)
        shard = int(np.searchsorted(self._starts, start, side="right")) - 1
        block = rows_across(self._arrays[shard:], start - int(self._starts[shard]), stop - start)
        return self._convert(block, self._norms[start:stop])

    def _gather(self, rows: np.ndarray) -> np.ndarray:
        block = np.empty((len(rows), self.shape[1]), dtype=self.manifest.dtype)
        shard_of = np.searchsorted(self._starts, rows, side="right") - 1
        for shard in np.unique(shard_of):
            selected = shard_of == shard
            block[selected] = self._arrays[shard][rows[selected] - self._starts[shard]]
        return self._convert(block, self._norms[rows])


def open_shards(folder: str | os.PathLike, *, verify: bool = True) -> ShardedEmbeddings:
    """Check a shard folder against its manifest and open its shards memory-mapped.

    Checked before any mining, each failure one ``DataValidationError`` naming the file: a missing or unfinished
    manifest, a manifest that does not add up, a missing shard, a shard of another size (truncated), shape or dtype
    than recorded, a SHA-256 that differs (``verify``, one read of every shard), rows that are NaN, inf or zero.
    """
    from bitext_hf.data.embeddings import needs_normalizing, read_embeddings, refuse_bad_rows, row_norms

    folder = os.fspath(folder)
    manifest_path = os.path.join(folder, MANIFEST)
    if not os.path.isfile(manifest_path):
        if os.path.isfile(os.path.join(folder, PROGRESS)):
            raise DataValidationError(
                f"{folder}: unfinished encoding (no {MANIFEST}, only {PROGRESS}); finish it with "
                "`bitext-hf encode ... --resume`"
            )
        raise DataValidationError(
            f"{folder}: no {MANIFEST}; not a folder of bitext-hf embedding shards (`bitext-hf encode --out FOLDER/`)"
        )
    manifest = read_manifest(manifest_path)
    if manifest.dimension is None or not manifest.shards:
        raise manifest_error(manifest_path, "no dimension or no shards")
    held = sum(shard.rows for shard in manifest.shards)
    if held != manifest.count:
        raise DataValidationError(f"{manifest_path}: count {manifest.count} but its shards hold {held} rows")
    arrays, norms = [], []
    for shard in manifest.shards:
        path = os.path.join(folder, shard.name)
        if not os.path.isfile(path):
            raise DataValidationError(f"{path}: missing (listed in {manifest_path})")
        size = os.path.getsize(path)
        if size != shard.bytes:
            raise DataValidationError(
                f"{path}: {size} bytes but {MANIFEST} records {shard.bytes}: truncated or replaced"
            )
        array = read_embeddings(path)
        expected = (shard.rows, manifest.dimension)
        if array.shape != expected or array.dtype != manifest.dtype:
            raise DataValidationError(
                f"{path}: holds {array.shape[0]} x {array.shape[1]} {array.dtype} but {MANIFEST} records "
                f"{expected[0]} x {expected[1]} {manifest.dtype}: a shard of another encoding"
            )
        if verify and _file_sha256(path) != shard.sha256:
            raise DataValidationError(
                f"{path}: its SHA-256 differs from the one in {MANIFEST}: changed since, or from another encoding"
            )
        shard_norms = row_norms(array)
        refuse_bad_rows(array, shard_norms, path, True)
        arrays.append(array)
        norms.append(shard_norms)
    all_norms = np.concatenate(norms)
    return ShardedEmbeddings(folder, manifest, arrays, all_norms, needs_normalizing(all_norms, folder))
