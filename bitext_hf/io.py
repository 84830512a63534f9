"""File input and output shared by every part of the package.

Outputs: a regular file appears complete or not at all (temp file and rename, umask honoured, temp removed on
error and on SIGTERM/SIGINT, leftovers of a killed run removed by the next one); anything else (``-`` for stdout,
a FIFO, a device, ``/dev/stdout``) is written directly and never replaced; a symlink the user names as ``--out``
is followed, not replaced, while files a command writes inside a folder (shards, manifests, cache entries) are
never written through a link or into anything but a regular file (``follow_symlinks=False``). Whatever the path,
no write replaces one of the running command's inputs (:func:`protect_inputs`, by device and inode).

Inputs: ``-`` (stdin), pipes and ``/dev/fd/N`` (process substitution) are read once as streams; ``.gz``, ``.xz``,
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
import secrets
import signal
import stat
import sys
import tempfile
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO

from bitext_hf.errors import BitextError, DataValidationError, OutputWriteError, UsageError

__all__ = [
    "atomic_output",
    "check_output_path",
    "compression_of",
    "input_byte_limit",
    "iter_input_chunks",
    "max_input_bytes",
    "non_regular_kind",
    "open_input",
    "parse_byte_count",
    "protect_inputs",
    "read_input_bytes",
    "writes_in_place",
]

StrPath = str | os.PathLike

# Errors that mean the storage failed under us, not a bug: reported as one line, with nothing left behind.
_WRITE_ERRNOS = {
    errno.ENOSPC: "no space left on device",
    errno.EDQUOT: "disk quota exceeded",
    errno.EIO: "input/output error",
    errno.EFBIG: "file too large for the file system",
    errno.EROFS: "read-only file system",
}
_TEMP_MARK = ".bitext-hf-"
_STD_STREAM = re.compile(r"/dev/(stdout|stderr|fd/(\d+))|/proc/(self|\d+)/fd/(\d+)")
# A temp name must stay under the usual 255-byte name limit; the rest of it is the marker, pid and token.
_MAX_NAME_BYTES = 180


# --------------------------------------------------------------------------------------------------- outputs


def _display(path: StrPath) -> str:
    return "<stdout>" if str(path) == "-" else str(path)


# The running command's inputs, (device, inode) -> the name it was given as: one registry that every write
# consults, so no path (a link in a shard folder, a sidecar name, a cache entry, a hard link) can reach an input.
_PROTECTED: dict[tuple[int, int], str] = {}


def protect_inputs(paths: Iterable[StrPath | None]) -> None:
    """Make every later :func:`atomic_output` and :func:`check_output_path` of this process refuse to replace one of
    ``paths`` (and, for a folder of shards, the files in it), compared by device and inode: a symbolic link, a
    ``..`` path or a hard link that leads to an input is refused too (``UsageError``, exit 2). It replaces the set
    of the previous call (one command at a time); ``protect_inputs(())`` clears it. ``-``, pipes and devices are
    skipped: they are read once and never replaced."""
    _PROTECTED.clear()
    for path in paths:
        text = "" if path is None else os.fspath(path)
        if text in ("", "-"):
            continue
        try:
            info = os.stat(text)
        except OSError:
            continue  # a missing input is reported by its reader
        if stat.S_ISDIR(info.st_mode):
            with contextlib.suppress(OSError), os.scandir(text) as entries:
                for entry in entries:
                    if entry.is_file():
                        inner = entry.stat()
                        _PROTECTED[(inner.st_dev, inner.st_ino)] = os.path.join(text, entry.name)
        elif stat.S_ISREG(info.st_mode):
            _PROTECTED[(info.st_dev, info.st_ino)] = text


def _refuse_input(path: str, shown: str, option: str | None = None) -> None:
    """``UsageError`` when ``path`` (followed) is one of the protected inputs."""
    try:
        info = os.stat(path)
    except OSError:
        return
    source = _PROTECTED.get((info.st_dev, info.st_ino))
    if source is not None:
        prefix = f"{option} {shown}" if option else shown
        raise UsageError(f"{prefix}: is the input {source}; writing it would destroy the input")


def non_regular_kind(path: StrPath) -> str | None:
    """What is at ``path`` itself when it is not a regular file ("a symbolic link", "a folder", "not a regular
    file": a FIFO, a device, a socket), else None (a regular file, or nothing). Never follows a link or opens."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return None
    if stat.S_ISREG(mode):
        return None
    return "a symbolic link" if stat.S_ISLNK(mode) else "a folder" if stat.S_ISDIR(mode) else "not a regular file"


def _refuse_non_regular(path: str) -> None:
    """``UsageError`` when something other than a regular file is at ``path`` itself: a file a command writes
    inside a folder is never written through a link, nor into a FIFO or a device."""
    kind = non_regular_kind(path)
    if kind is not None:
        raise UsageError(f"{path}: is {kind}; bitext-hf writes only regular files there (remove it first)")


def _is_direct(path: str) -> bool:
    """Written in place: stdout, an existing non-regular file (FIFO, device), or a /dev or /proc path (/dev/stdout
    may resolve to the regular file stdout is redirected to; replacing that file would detach it from the shell)."""
    if path == "-":
        return True
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return not stat.S_ISREG(mode) or _STD_STREAM.fullmatch(os.path.abspath(path)) is not None


def writes_in_place(path: StrPath) -> bool:
    """Whether :func:`atomic_output` writes ``path`` in place (stdout, a FIFO, a device): no regular file appears."""
    return _is_direct(os.fspath(path))


def _temp_prefix(name: str) -> str:
    short = os.fsdecode(os.fsencode(name)[:_MAX_NAME_BYTES])
    return f".{short}{_TEMP_MARK}"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, owned by someone else
        return True
    return True


def _remove_leftovers(folder: str, name: str) -> None:
    """Delete temp files of earlier writes to the same path whose process is gone (killed with SIGKILL, a crash)."""
    pattern = re.compile(re.escape(_temp_prefix(name)) + r"(\d+)-[0-9a-f]+\.tmp")
    try:
        entries = os.listdir(folder)
    except OSError:
        return
    for entry in entries:
        match = pattern.fullmatch(entry)
        if match and int(match.group(1)) != os.getpid() and not _pid_alive(int(match.group(1))):
            with contextlib.suppress(OSError):
                os.unlink(os.path.join(folder, entry))


# Temp files being written now (with the pid that writes each: a forked child must not delete its parent's),
# removed by the signal handler before the process dies of SIGTERM/SIGINT.
_ACTIVE: dict[str, int] = {}
_ACTIVE_LOCK = threading.Lock()
_PREVIOUS_HANDLERS: dict[int, object] = {}


def _on_signal(signum: int, frame) -> None:
    previous = _PREVIOUS_HANDLERS.get(signum, signal.SIG_DFL)
    if callable(previous):
        # Python's own SIGINT handler (KeyboardInterrupt) or the application's: an exception unwinds through
        # atomic_output, which removes its temp file; a handler that returns lets the write go on.
        previous(signum, frame)
        return
    for name, pid in list(_ACTIVE.items()):
        if pid == os.getpid():
            with contextlib.suppress(OSError):
                os.unlink(name)
    # Die of the signal as the default disposition would, so the parent sees the conventional status (143 / -15).
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def _register(temp: str) -> None:
    """Remember a temp file; in the main thread (the only one that may set handlers), handle SIGTERM/SIGINT."""
    with _ACTIVE_LOCK:
        _ACTIVE[temp] = os.getpid()
        if threading.current_thread() is not threading.main_thread():
            return
        for signum in (signal.SIGTERM, signal.SIGINT):
            previous = signal.getsignal(signum)
            # Ignored (nohup), set outside Python, or already ours: leave it.
            if previous in (signal.SIG_IGN, None) or previous is _on_signal:
                continue
            _PREVIOUS_HANDLERS[signum] = previous
            signal.signal(signum, _on_signal)


def _unregister(temp: str) -> None:
    """Forget a temp file; when none is left, give the signals back to their previous handlers."""
    with _ACTIVE_LOCK:
        _ACTIVE.pop(temp, None)
        if _ACTIVE or threading.current_thread() is not threading.main_thread():
            return  # a handler left installed by another thread's write is harmless: it defers to the previous
        for signum, previous in list(_PREVIOUS_HANDLERS.items()):
            if signal.getsignal(signum) is _on_signal:
                signal.signal(signum, previous)
            del _PREVIOUS_HANDLERS[signum]


# numpy writes arrays to a real file with C's fwrite, which drops errno: a short write is all it reports.
_SHORT_WRITE = re.compile(r"\d+ requested and \d+ written")


def _errno_of_short_write(folder: str) -> int:
    """Why a write came up short, from what the file system says now: full (or over quota for us) or not."""
    try:
        space = os.statvfs(folder)
    except OSError:
        return errno.EIO
    return errno.ENOSPC if space.f_bavail == 0 or space.f_favail == 0 else errno.EIO


def _write_error(path: StrPath, error: OSError, *, replaced: bool) -> OutputWriteError | None:
    code = error.errno
    if code is None and _SHORT_WRITE.fullmatch(str(error)):
        code = _errno_of_short_write(os.path.dirname(os.path.abspath(os.fspath(path))))
    reason = _WRITE_ERRNOS.get(code or -1)
    if reason is None:
        return None
    tail = "nothing was written" if replaced else "the output is incomplete"
    wrapped = OutputWriteError(f"{_display(path)}: {reason}; {tail}")  # one line: no "[Errno N]" prefix
    wrapped.errno = code
    return wrapped


def _own_descriptor(path: str) -> int | None:
    """The descriptor number that ``/dev/stdout``, ``/dev/stderr``, ``/dev/fd/N`` or ``/proc/self/fd/N`` names."""
    match = _STD_STREAM.fullmatch(os.path.abspath(path))
    if match is None:
        return None
    if match.group(1) in ("stdout", "stderr"):
        return 1 if match.group(1) == "stdout" else 2
    if match.group(3) not in (None, "self", str(os.getpid())):
        return None  # another process's descriptor: written as the path it is
    return int(match.group(2) or match.group(4))


def _open_kwargs(mode: str) -> dict:
    return {} if "b" in mode else {"encoding": "utf-8", "newline": ""}


@contextlib.contextmanager
def _direct_output(path: str, mode: str) -> Iterator[IO]:
    """Write straight to stdout, a FIFO or a device: streaming, never replaced."""
    descriptor = _own_descriptor(path)
    try:
        if path == "-" or descriptor == 1:
            stream = sys.stdout.buffer if "b" in mode else sys.stdout
            yield stream
            stream.flush()
        elif descriptor is not None:
            # open("/dev/stdout") would reopen the file a descriptor is redirected to, at offset 0 and truncated
            # ("w"): what the process wrote before, and writes it makes after, would overwrite each other. A
            # duplicate of the descriptor shares its offset and append flag instead.
            sys.stdout.flush()
            sys.stderr.flush()
            with os.fdopen(os.dup(descriptor), mode, **_open_kwargs(mode)) as handle:
                yield handle
        else:
            with open(path, mode, **_open_kwargs(mode)) as handle:
                yield handle
    except OSError as error:
        raise _write_error(path, error, replaced=False) or error from None


@contextlib.contextmanager
def atomic_output(path: StrPath, mode: str = "w", *, follow_symlinks: bool = True) -> Iterator[IO]:
    """Open ``path`` for writing so that a regular file appears complete or not at all.

    ``-`` writes to stdout; an existing FIFO or device (``/dev/null``, ``/dev/stdout``) is written directly; a
    symlink is followed and its target replaced atomically. With ``follow_symlinks=False`` (files a command writes
    inside a folder: shards, manifests, cache entries) ``path`` itself is replaced, and an existing link, FIFO,
    device or folder there raises ``UsageError`` before anything is opened. A path that leads to one of the
    command's inputs (:func:`protect_inputs`) raises ``UsageError``. A new file gets ``0o666 & ~umask``, an
    existing one keeps its mode. A full disk or an I/O error raises ``OutputWriteError`` and leaves nothing behind.
    """
    path = os.fspath(path)
    if not follow_symlinks:
        _refuse_non_regular(path)
    elif _is_direct(path):
        with _direct_output(path, mode) as handle:
            yield handle
        return
    # Following a symlink the user named: its target gets the new content, the link stays.
    target = os.path.realpath(path) if follow_symlinks else os.path.abspath(path)
    _refuse_input(target, path)
    folder, name = os.path.split(target)
    if not os.path.isdir(folder):
        raise FileNotFoundError(errno.ENOENT, f"output folder does not exist: {os.path.dirname(path) or '.'}")
    _remove_leftovers(folder, name)
    try:
        kept_mode = stat.S_IMODE(os.stat(target).st_mode)
    except FileNotFoundError:
        kept_mode = None
    temp = os.path.join(folder, f"{_temp_prefix(name)}{os.getpid()}-{secrets.token_hex(4)}.tmp")
    _register(temp)
    try:
        # os.open applies the umask to 0o666, as any new file gets (mkstemp would force 0o600).
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o666)
        if kept_mode is not None:
            os.fchmod(fd, kept_mode)
        with os.fdopen(fd, mode, **_open_kwargs(mode)) as handle:
            yield handle
            # On disk before the rename: a crash then leaves the old file or the new one, never an empty one, and
            # some file systems (NFS, quotas) report a full disk only here.
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, target)
    except BaseException as error:
        # Classified before the temp file goes: a short write is told apart by the space the file took.
        wrapped = _write_error(path, error, replaced=True) if isinstance(error, OSError) else None
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp)
        if wrapped is not None:
            raise wrapped from None
        raise
    finally:
        _unregister(temp)


def _probe_writable(folder: str) -> bool:
    """Create and remove a file: the only test that holds for root, read-only mounts and ACLs alike."""
    try:
        fd, name = tempfile.mkstemp(prefix=f"{_TEMP_MARK}probe-", dir=folder)
    except OSError:
        return False
    os.close(fd)
    with contextlib.suppress(OSError):
        os.unlink(name)
    return True


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)  # also catches hard links
    except OSError:
        return os.path.realpath(a) == os.path.realpath(b)


def check_output_path(path: StrPath | None, *, inputs: Iterable[StrPath | None] = (), option: str = "--out") -> None:
    """Refuse an output path that cannot work, before any work is done (``UsageError``, exit 2).

    Refused: an empty path, an existing directory, a parent folder that is missing, not a folder or not writable,
    and a path that is (through symlinks, ``..`` or a hard link) one of ``inputs``. ``-`` (stdout) and existing
    non-regular files (``/dev/null``, a FIFO) are accepted.
    """
    text = "" if path is None else os.fspath(path)
    if not text.strip():
        raise UsageError(f"{option}: empty output path")
    if text == "-":
        return
    if os.path.isdir(text):
        raise UsageError(f"{option} {text}: is a directory; give a file path")
    if _is_direct(text):
        return
    folder = os.path.dirname(os.path.realpath(text))
    shown = os.path.dirname(text) or "."
    try:
        folder_mode = os.stat(folder).st_mode
    except FileNotFoundError:
        raise UsageError(f"{option} {text}: folder {shown} does not exist") from None
    except NotADirectoryError:
        raise UsageError(f"{option} {text}: {shown} is not a folder") from None
    if not stat.S_ISDIR(folder_mode):
        raise UsageError(f"{option} {text}: {shown} is not a folder")
    if not _probe_writable(folder):
        raise UsageError(f"{option} {text}: folder {shown} is not writable")
    name_bytes = len(os.fsencode(os.path.basename(text)))
    try:
        limit = os.pathconf(folder, "PC_NAME_MAX")
    except (OSError, ValueError):  # the file system does not say
        limit = name_bytes
    if name_bytes > limit:
        raise UsageError(
            f"{option} {text}: the name is {name_bytes} bytes, longer than the {limit} this folder allows"
        )
    for source in inputs:
        if source is None or os.fspath(source) in ("", "-"):
            continue
        if _same_file(text, os.fspath(source)):
            raise UsageError(f"{option} {text}: is the input {os.fspath(source)}; writing it would destroy the input")
    _refuse_input(text, text, option)


# ---------------------------------------------------------------------------------------------------- inputs

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
# 2 GiB of text a file. Read as a list of lines, text costs 1.6x its bytes (lines of 100 ASCII characters) to 2.4x
# (40 characters), and 2.6x to 3.4x at the peak of the split; two inputs of 2 GiB (mine, score) thus stay within
# about 12 GiB, which a 24 GiB machine holds beside an encoder.
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
