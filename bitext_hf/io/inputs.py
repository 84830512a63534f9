"""Inputs: ``-`` (stdin), pipes and ``/dev/fd/N`` (process substitution) are read once as streams; ``.gz``, ``.xz``,
``.bz2`` (standard library) and ``.zst`` (``zstandard``) are decompressed transparently, chosen by extension for
files and by magic bytes for streams. No input yields more than a bound of bytes once decompressed
(:func:`max_input_bytes`: ``--max-input-bytes``, ``$BITEXT_HF_MAX_INPUT_BYTES``, 2 GiB by default), so an endless
pipe, ``/dev/zero`` or a decompression bomb is refused instead of filling the memory.
"""

from __future__ import annotations

import bz2
import contextlib
import contextvars
import errno
import gzip
import io
import lzma
import os
import re
import stat
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from bitext_hf.errors import BitextError, DataValidationError, UsageError

__all__ = [
    "compression_of",
    "input_byte_limit",
    "iter_input_chunks",
    "max_input_bytes",
    "open_input",
    "parse_byte_count",
    "read_input_bytes",
]

StrPath = str | os.PathLike


# Magic bytes of the formats. gzip, xz and zstd start with bytes that cannot begin UTF-8 text; bzip2's "BZh" can,
# so its block size digit and the magic of its first block (or of its end, for an empty stream) must follow.
_MAGIC = (
    (re.compile(rb"\x1f\x8b"), "gz"),
    (re.compile(rb"\xfd7zXZ\x00"), "xz"),
    (re.compile(rb"\x28\xb5\x2f\xfd"), "zst"),
    (re.compile(rb"BZh[1-9](\x31\x41\x59\x26\x53\x59|\x17\x72\x45\x38\x50\x90)"), "bz2"),
)
_MAGIC_BYTES = 10
_SUFFIXES = {".gz": "gz", ".xz": "xz", ".bz2": "bz2", ".zst": "zst"}
_NAMES = {"gz": "gzip", "xz": "xz", "bz2": "bzip2", "zst": "zstandard"}

MAX_INPUT_BYTES_ENV = "BITEXT_HF_MAX_INPUT_BYTES"
# Why 2 GiB: a text input read as lines, within the bound (bytes, and lines: data/readers.py), holds under twice
# the bound in memory as Python strings, three times at the peak of the split, whatever its line lengths; the two
# inputs of `mine` or `score` thus fit a 24 GiB machine beside an encoder.
DEFAULT_MAX_INPUT_BYTES = 2 * 1024**3
_BYTE_UNITS = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4}
_BYTE_COUNT = re.compile(r"\s*(\d+)\s*([KMGT]?)(?:I?B)?\s*", re.IGNORECASE)
# The bound set by the command line for the command being run (input_byte_limit), else None.
_INPUT_LIMIT: contextvars.ContextVar[int | None] = contextvars.ContextVar("max_input_bytes", default=None)


def parse_byte_count(text: str) -> int:
    """``2147483648``, ``2G``, ``512M``, ``64K`` (powers of 1024; a trailing ``B`` / ``iB`` is allowed) -> bytes."""
    match = _BYTE_COUNT.fullmatch(text)
    if not match or int(match[1]) < 1:
        raise ValueError(f"expected a byte count of at least 1, such as 2G, 512M or 1000000, got {text!r}")
    return int(match[1]) * _BYTE_UNITS[match[2].upper()]


def max_input_bytes() -> int:
    """The most bytes one input may hold once decompressed: the bound set with :func:`input_byte_limit` (the CLI's
    ``--max-input-bytes``), else ``$BITEXT_HF_MAX_INPUT_BYTES``, else :data:`DEFAULT_MAX_INPUT_BYTES`."""
    limit = _INPUT_LIMIT.get()
    if limit is not None:
        return limit
    text = os.environ.get(MAX_INPUT_BYTES_ENV, "").strip()
    if not text:
        return DEFAULT_MAX_INPUT_BYTES
    try:
        return parse_byte_count(text)
    except ValueError as error:
        raise UsageError(f"{MAX_INPUT_BYTES_ENV}: {error}") from None


@contextlib.contextmanager
def input_byte_limit(limit: int | None) -> Iterator[None]:
    """Within the block, inputs may hold at most ``limit`` bytes (``None``: the environment's or default bound)."""
    token = _INPUT_LIMIT.set(limit)
    try:
        yield
    finally:
        _INPUT_LIMIT.reset(token)


def _too_large(shown: str, limit: int, decompressed: bool) -> DataValidationError:
    what = "once decompressed " if decompressed else ""
    return DataValidationError(
        f"{shown}: holds more than {limit} bytes {what}(the input bound); raise it with --max-input-bytes or "
        f"{MAX_INPUT_BYTES_ENV} if this input is meant to be that large"
    )


class _Bounded(io.RawIOBase):
    """A stream that refuses to yield more than ``limit`` bytes: an endless pipe, ``/dev/zero`` or a decompression
    bomb is stopped at the bound instead of filling the memory."""

    def __init__(self, inner: IO[bytes], limit: int, error: DataValidationError):
        self._inner, self._left, self._error = inner, limit, error

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        # One byte past the bound is asked for, so that an input of exactly ``limit`` bytes is accepted.
        wanted = min(len(buffer), self._left + 1)
        data = self._inner.read(wanted)
        if len(data) > self._left:
            raise self._error
        buffer[: len(data)] = data
        self._left -= len(data)
        return len(data)


def compression_of(path: StrPath) -> str | None:
    """``gz`` / ``xz`` / ``bz2`` / ``zst`` for a compressed file name, else None."""
    return _SUFFIXES.get(Path(os.fspath(path)).suffix.lower())


class _Prefixed(io.RawIOBase):
    """A stream with its first bytes (read to sniff the format) put back in front: a pipe cannot seek back."""

    def __init__(self, prefix: bytes, rest: IO[bytes]):
        self._prefix, self._rest = prefix, rest

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        if self._prefix:
            count = min(len(buffer), len(self._prefix))
            buffer[:count] = self._prefix[:count]
            self._prefix = self._prefix[count:]
            return count
        data = self._rest.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)


class _ZstdReader(io.RawIOBase):
    """Frame-by-frame zstandard decompression that reports a truncated frame (EOFError), as gzip/lzma/bz2 do;
    ``zstandard``'s own stream_reader returns the partial data without a word."""

    def __init__(self, raw: IO[bytes]):
        import zstandard

        self._raw, self._decompressor = raw, zstandard.ZstdDecompressor()
        self._frame = None
        self._out, self._pos, self._done = b"", 0, False

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        while self._pos >= len(self._out) and not self._done:
            chunk = self._raw.read(1 << 16)
            if not chunk:
                if self._frame is not None and not self._frame.eof:
                    raise EOFError("compressed file ended before the end of the last zstandard frame")
                self._done = True
                break
            pieces = []
            while chunk:  # one file may hold several frames (pzstd, concatenated files)
                if self._frame is None or self._frame.eof:
                    self._frame = self._decompressor.decompressobj()
                pieces.append(self._frame.decompress(chunk))
                chunk = self._frame.unused_data if self._frame.eof else b""
            self._out, self._pos = b"".join(pieces), 0
        count = min(len(buffer), len(self._out) - self._pos)
        buffer[:count] = self._out[self._pos : self._pos + count]
        self._pos += count
        return count


def _decompressed(raw: IO[bytes], kind: str | None) -> IO[bytes]:
    if kind == "gz":
        return gzip.GzipFile(fileobj=raw, mode="rb")
    if kind == "xz":
        return lzma.LZMAFile(raw, "rb")
    if kind == "bz2":
        return bz2.BZ2File(raw, "rb")
    if kind == "zst":
        return io.BufferedReader(_ZstdReader(raw))
    return raw


def _corrupt_errors() -> tuple[type[BaseException], ...]:
    errors: list[type[BaseException]] = [EOFError, gzip.BadGzipFile, lzma.LZMAError]
    with contextlib.suppress(ImportError):
        import zstandard

        errors.append(zstandard.ZstdError)
    return tuple(errors)


def _input_display(path: str) -> str:
    return "<stdin>" if path == "-" else path


@contextlib.contextmanager
def open_input(path: StrPath, mode: str = "rb", *, max_bytes: int | None = None) -> Iterator[IO]:
    """Open an input for one pass of reading: ``-`` (stdin), a pipe, ``/dev/fd/N`` or a file, decompressing
    ``.gz`` / ``.xz`` / ``.bz2`` / ``.zst``. ``mode`` is ``"rb"`` (bytes) or ``"r"`` (UTF-8 text).

    A missing, unreadable or directory input, corrupt compressed data, and an input of more than ``max_bytes``
    bytes once decompressed (default :func:`max_input_bytes`; a plain file is measured before it is read, a stream
    or compressed file when the bound is passed) raise ``DataValidationError`` naming the file.
    """
    if mode not in ("rb", "r", "rt"):
        raise ValueError(f"open_input reads only: mode 'rb' or 'r', not {mode!r}")
    path = os.fspath(path)
    shown = _input_display(path)
    limit = max_input_bytes() if max_bytes is None else max_bytes
    with contextlib.ExitStack() as stack:
        if path == "-":
            raw, stream = sys.stdin.buffer, True  # not closed: it belongs to the process
        else:
            try:
                if os.path.isdir(path):
                    raise IsADirectoryError(errno.EISDIR, "is a directory")
                info = os.stat(path)
                stream = not stat.S_ISREG(info.st_mode)
                raw = stack.enter_context(open(path, "rb"))
            except FileNotFoundError:
                raise DataValidationError(f"{shown}: no such file") from None
            except IsADirectoryError:
                raise DataValidationError(f"{shown}: is a directory, expected a file") from None
            except PermissionError:
                raise DataValidationError(f"{shown}: permission denied") from None
            except OSError as error:
                raise DataValidationError(f"{shown}: cannot be read ({error.strerror or error})") from None
        kind = None if stream else compression_of(path)
        if not stream and kind is None and info.st_size > limit:
            raise _too_large(shown, limit, decompressed=False)  # measured before a byte is read
        if stream:
            head = raw.read(_MAGIC_BYTES)
            kind = next((name for magic, name in _MAGIC if magic.match(head)), None)
            raw = io.BufferedReader(_Prefixed(head, raw))
        binary = stack.enter_context(_decompressed(raw, kind)) if kind else raw
        binary = io.BufferedReader(_Bounded(binary, limit, _too_large(shown, limit, decompressed=kind is not None)))
        handle = io.TextIOWrapper(binary, encoding="utf-8", newline="") if mode != "rb" else binary
        try:
            yield handle
        except Exception as error:
            # bz2 reports bad data as an OSError without errno (real I/O failures carry one); errors of the
            # caller's own (an OutputWriteError is an OSError too) pass through.
            corrupt = isinstance(error, _corrupt_errors()) or (
                isinstance(error, OSError) and error.errno is None and not isinstance(error, BitextError)
            )
            if kind and corrupt:
                raise DataValidationError(f"{shown}: corrupt or truncated {_NAMES[kind]} data ({error})") from None
            raise
        finally:
            if isinstance(handle, io.TextIOWrapper):
                handle.detach()  # the ExitStack closes what was opened; stdin stays open


_CHUNK_BYTES = 1 << 20


def iter_input_chunks(path: StrPath, *, max_bytes: int | None = None) -> Iterator[bytes]:
    """The bytes of an input (see ``open_input``, which bounds them), decompressed, a chunk of up to 1 MiB at a
    time: a reader can refuse bad data at its first chunk instead of after the whole input."""
    with open_input(path, max_bytes=max_bytes) as handle:
        while True:
            try:
                chunk = handle.read(_CHUNK_BYTES)
            except OSError as error:
                if error.errno is None:  # bad compressed data: open_input names it
                    raise
                shown = _input_display(os.fspath(path))
                raise DataValidationError(f"{shown}: read failed ({error.strerror})") from None
            if not chunk:
                return
            yield chunk


def read_input_bytes(path: StrPath, *, max_bytes: int | None = None) -> bytes:
    """All bytes of an input (see ``open_input``, which bounds them), decompressed."""
    data = bytearray()  # grown in place: no second copy of the whole input as a list of chunks is joined
    for chunk in iter_input_chunks(path, max_bytes=max_bytes):
        data += chunk
    return bytes(data)
