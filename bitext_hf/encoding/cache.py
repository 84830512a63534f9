"""The encoding cache: embeddings of a list of sentences, kept on disk by content and encoder, so that running
``mine``, ``score``, ``eval`` or ``encode`` again on the same text does not encode it again (nor load the encoder).
``encode --out FOLDER/`` cuts its shards from the entry of the whole text when there is one, but writes none: that
would hold the whole text in memory, which shards exist to avoid.

An entry is one file named by the SHA-256 of (the sentences' SHA-256, their number, the encoder's identity): a
float32 ``.npy`` array followed by a 48-byte trailer, a marker and the SHA-256 of the entry's key and array bytes
(``numpy.load`` still reads the file; the trailer lies past the array). The encoder's identity is its name and
pooling; for a local model folder also the size and modification time of every file in it, so retraining into the
same folder does not return stale vectors (a hub id is keyed by its name).

The cache can only make a run faster, never wrong, failed or stuck:

- An entry is opened without following a link and without blocking (``O_NOFOLLOW | O_NONBLOCK``), and read only
  when it is a regular file. It is served only when its checksum, float32 dtype, shape and values (finite, no
  all-zero row) all hold; one that fails any check is encoded again, with one warning naming it, and removed
  (where it can be: a folder is not, nor an entry in a read-only cache) so that a good entry takes its place.
- Entries are written atomically (temp file and rename; concurrent and killed runs leave whole entries or none)
  and never through a link or into anything but a regular file.
- A cache that cannot be written (a read-only or shared folder, a full disk, a root that is a file) gets one
  warning and is not written again in the run; the run goes on, and the good entries it holds are served.

The folder is ``--cache-dir``, else ``$BITEXT_HF_EMBEDDING_CACHE``, else ``$XDG_CACHE_HOME/bitext-hf/embeddings``
(``~/.cache/bitext-hf/embeddings``). Nothing is evicted: delete the folder to reclaim the space.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import io
import json
import logging
import os
import stat
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from bitext_hf.data.hashing import text_sha256
from bitext_hf.errors import BitextError
from bitext_hf.io import atomic_output

__all__ = ["ENV_CACHE_DIR", "EmbeddingCache", "default_cache_dir", "entry_key"]

logger = logging.getLogger("bitext_hf")

ENV_CACHE_DIR = "BITEXT_HF_EMBEDDING_CACHE"
# 2: entries carry a checksum trailer. Entries of version 1 have other keys, so they are never read.
_KEY_VERSION = 2
_TRAILER_MARK = b"bitext-hf sha256"
_TRAILER_SIZE = len(_TRAILER_MARK) + hashlib.sha256().digest_size
_DTYPE = np.dtype(np.float32)
_CHUNK = 1 << 24  # bytes per write and per read call: large arrays are neither copied whole nor read in one call
# Opening never follows a link at the entry's path nor waits for a FIFO's writer; what is opened is read only when
# fstat says it is a regular file. (Platforms without these flags still get the fstat check and the checksum.)
_NO_FOLLOW = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)


def default_cache_dir() -> Path:
    """``$BITEXT_HF_EMBEDDING_CACHE``, else ``$XDG_CACHE_HOME/bitext-hf/embeddings`` (``~/.cache`` by default)."""
    if os.environ.get(ENV_CACHE_DIR):
        return Path(os.environ[ENV_CACHE_DIR])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "bitext-hf" / "embeddings"


def _folder_fingerprint(path: str) -> list:
    """(relative path, size, mtime) of every file under a local model folder: stat calls only, no reading."""
    entries = []
    for root, folders, files in os.walk(path):
        folders.sort()
        for name in sorted(files):
            full = os.path.join(root, name)
            with contextlib.suppress(OSError):
                stat_result = os.stat(full)
                entries.append([os.path.relpath(full, path), stat_result.st_size, stat_result.st_mtime_ns])
    return entries


def entry_key(
    texts: Sequence[str],
    spec: str | os.PathLike | None,
    pooling: str | None = None,
    *,
    context: str | None = None,
    quantize: str | None = None,
    backend: str | None = None,
) -> str:
    """The key of the entry holding the embeddings of ``texts`` by the encoder ``spec`` (see the module docstring).

    ``context`` names anything else the vectors depend on (the LASER3 teacher cache keys its curriculum stage with it);
    left out, the key is the one the CLI has always used.
    """
    from bitext_hf.encoders.spec import EncoderSpec

    identity: dict = {"encoder": EncoderSpec(spec, pooling, quantize, backend).identity}
    if spec is not None and os.path.isdir(spec):
        identity["folder"] = os.path.realpath(spec)
        identity["files"] = _folder_fingerprint(os.fspath(spec))
    if context is not None:
        identity["context"] = context
    payload = {"version": _KEY_VERSION, "texts": text_sha256(texts), "count": len(texts), **identity}
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode("utf-8")).hexdigest()


class _BadEntry(Exception):
    """An entry that exists but must not be served; the message says why."""


def _bad_values(array: np.ndarray) -> str | None:
    """Why these embeddings cannot be served (NaN / inf, an all-zero row), else None. Checked in blocks of rows, so
    the temporary masks stay small next to a large array."""
    rows = max(1, _CHUNK // max(1, array.shape[1] * array.itemsize))
    for start in range(0, array.shape[0], rows):
        block = array[start : start + rows]
        if not np.isfinite(block).all():
            return "holds NaN or infinite values"
        if not block.any(axis=1).all():
            return "holds an all-zero row"
    return None


def _read_regular_file(path: Path, memory_map: bool = False) -> bytearray | np.memmap | None:
    """The bytes of ``path`` when it is a regular file (read, or mapped read-only as uint8 with ``memory_map``); None
    when nothing is there. Never follows a link, never blocks on a FIFO (opened non-blocking, read or mapped only
    after fstat says it is a regular file)."""
    try:
        fd = os.open(path, _NO_FOLLOW)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise _BadEntry("is a symbolic link") from None
        raise _BadEntry(f"cannot be opened ({error.strerror})") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise _BadEntry("is not a regular file")
        if memory_map:
            if not info.st_size:
                raise _BadEntry("is empty")
            # Mapped from the descriptor checked above, not reopened by name. Entries are replaced by rename, never
            # rewritten in place, so the mapped file keeps the bytes whose checksum is verified.
            with open(fd, "rb", closefd=False) as handle:
                return np.memmap(handle, dtype=np.uint8, mode="r")
        data = bytearray(info.st_size)
        view, done = memoryview(data), 0
        while done < len(data):
            got = os.readv(fd, [view[done : done + _CHUNK]])
            if not got:
                raise _BadEntry("is truncated (it shrank while being read)")
            done += got
    except OSError as error:
        raise _BadEntry(f"cannot be read ({error.strerror})") from None
    finally:
        os.close(fd)
    return data


def _parse_entry(data: bytearray | np.memmap, key: str, count: int) -> np.ndarray:
    """The (count, d) float32 array of an entry's bytes, checked: trailer and checksum, header, dtype, shape and
    values. The array is a view of ``data`` (no copy): writable over a bytearray, a read-only ``np.memmap`` over a
    mapping."""
    view = memoryview(data)
    if len(view) < _TRAILER_SIZE or view[-_TRAILER_SIZE : -_TRAILER_SIZE + len(_TRAILER_MARK)] != _TRAILER_MARK:
        raise _BadEntry("is truncated or not a cache entry (no checksum trailer)")
    payload = view[:-_TRAILER_SIZE]
    digest = hashlib.sha256(key.encode("ascii"))
    digest.update(payload)
    if digest.digest() != view[-hashlib.sha256().digest_size :]:
        raise _BadEntry("fails its checksum (damaged or changed since it was written)")
    try:
        header = io.BytesIO(payload[: 1 << 17])  # a version 1.0 header is at most 64 KiB
        if np.lib.format.read_magic(header) != (1, 0):
            raise ValueError("not a version 1.0 .npy header")
        shape, fortran_order, dtype = np.lib.format.read_array_header_1_0(header)
    except Exception as error:  # numpy's header parser raises ValueError, and tokenize.TokenError, among others
        raise _BadEntry(f"is not a readable .npy array ({error})") from None
    if dtype != _DTYPE or fortran_order:
        raise _BadEntry(f"holds {dtype} {'Fortran-ordered ' if fortran_order else ''}data, expected float32")
    if len(shape) != 2 or shape[0] != count or shape[1] < 1:
        raise _BadEntry(f"has shape {shape}, expected ({count}, d)")
    offset = header.tell()
    if len(payload) - offset != shape[0] * shape[1] * _DTYPE.itemsize:
        raise _BadEntry(f"holds {len(payload) - offset} bytes of data for shape {shape}")
    raw = data if isinstance(data, np.ndarray) else np.frombuffer(data, dtype=np.uint8)
    array = raw[offset : offset + shape[0] * shape[1] * _DTYPE.itemsize].view(_DTYPE).reshape(shape)
    reason = _bad_values(array)
    if reason is not None:
        raise _BadEntry(reason)
    return array


class EmbeddingCache:
    """Embeddings on disk under ``root``, keyed by the sentences and the encoder (see the module docstring).

    One instance serves a whole run: it remembers which entries it reported and whether writing failed, so that
    each problem is warned about once.
    """

    def __init__(self, root: str | os.PathLike | None = None) -> None:
        self.root = Path(root) if root is not None else default_cache_dir()
        self._reported: set[str] = set()  # keys of entries dropped with a warning
        self._write_failed = False

    def key(
        self,
        texts: Sequence[str],
        spec: str | os.PathLike | None,
        pooling: str | None = None,
        quantize: str | None = None,
        backend: str | None = None,
    ) -> str:
        return entry_key(texts, spec, pooling, quantize=quantize, backend=backend)

    def path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.npy"

    def load(self, key: str, count: int, *, memory_map: bool = False) -> np.ndarray | None:
        """The cached float32 (count, d) embeddings (a writable array; with ``memory_map`` a read-only ``np.memmap``,
        for arrays too large to hold in memory twice), or None: absent, or failing a check (then removed, with one
        warning, so that the run encodes again and stores a good entry in its place)."""
        path = self.path(key)
        try:
            data = _read_regular_file(path, memory_map)
            return None if data is None else _parse_entry(data, key, count)
        except _BadEntry as bad:
            self._reported.add(key)
            outcome = "removed"
            try:
                os.unlink(path)  # removes a link itself, never its target
            except FileNotFoundError:
                pass
            except OSError:
                outcome = "not used (it cannot be removed)"
            logger.warning("%s: cache entry %s; %s, encoding again", path, bad, outcome)
            return None

    def store(self, key: str, embeddings: np.ndarray) -> bool:
        """Write the entry of ``key`` atomically and say whether it was written; a failure is one warning for the run
        (the run goes on), after which the cache is not written again. Embeddings that a later load would refuse are
        not stored."""
        if self._write_failed:
            return False
        array = np.ascontiguousarray(embeddings, dtype=_DTYPE)
        reason = "is not 2-D" if array.ndim != 2 or 0 in array.shape else _bad_values(array)
        if reason is not None:  # the run reports these embeddings itself where they matter
            logger.info("not caching embeddings that %s", reason.removeprefix("is ").removeprefix("holds "))
            return False
        path = self.path(key)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            if not stat.S_ISDIR(os.lstat(path.parent).st_mode):  # entries are never written through a link
                raise NotADirectoryError(errno.ENOTDIR, "a symbolic link, not a folder", os.fspath(path.parent))
            with atomic_output(path, "wb", follow_symlinks=False) as handle:
                _write_entry(handle, key, array)
        except (OSError, BitextError) as error:
            self._write_failed = True
            if key in self._reported:  # its load warned already; the same problem needs no second line
                logger.info("%s: could not replace the cache entry (%s)", path, error)
            else:
                logger.warning("%s: could not write the encoding cache (%s); continuing without it", path, error)
            return False
        return True


def _write_entry(handle, key: str, array: np.ndarray) -> None:
    """A .npy header, the array's bytes and the trailer (marker, SHA-256 of the key and everything before it)."""
    digest = hashlib.sha256(key.encode("ascii"))
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, np.lib.format.header_data_from_array_1_0(array))
    chunks = [header.getvalue()]
    flat = memoryview(array.reshape(-1)).cast("B")
    chunks += (flat[start : start + _CHUNK] for start in range(0, len(flat), _CHUNK))
    for chunk in chunks:
        digest.update(chunk)
        handle.write(chunk)
    handle.write(_TRAILER_MARK + digest.digest())
