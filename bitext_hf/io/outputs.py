"""Outputs: a regular file appears complete or not at all (temp file and rename, umask honoured, temp removed on
error and on SIGTERM/SIGINT, leftovers of a killed run removed by the next one); anything else (``-`` for stdout,
a FIFO, a device, ``/dev/stdout``) is written directly and never replaced; a symlink the user names as ``--out``
is followed, not replaced, while files a command writes inside a folder (shards, manifests, cache entries) are
never written through a link or into anything but a regular file (``follow_symlinks=False``). Whatever the path,
no write replaces one of the running command's inputs (:func:`protect_inputs`, by device and inode). A run that
writes several files plans them in an :class:`bitext_hf.io.output_set.OutputSet`, built on the checks here.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import stat
import sys
import tempfile
from collections.abc import Iterable, Iterator
from typing import IO

from bitext_hf.errors import OutputWriteError, UsageError
from bitext_hf.io.small_files import file_kind
from bitext_hf.io.temporary_files import TEMP_MARK, register_temp, remove_leftovers, temp_path, unregister_temp

__all__ = [
    "atomic_output",
    "check_inputs_and_output",
    "check_name_length",
    "check_named_output",
    "check_output_path",
    "check_writable_folder",
    "checked_stdout",
    "folder_is_writable",
    "input_ids",
    "non_regular_kind",
    "open_arguments",
    "own_descriptor",
    "protect_inputs",
    "refuse_input",
    "storage_error",
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
_STD_STREAM = re.compile(r"/dev/(stdout|stderr|fd/(\d+))|/proc/(self|\d+)/fd/(\d+)")


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


InputIds = dict[tuple[int, int] | str, str]


def input_ids(paths: Iterable[StrPath | None]) -> InputIds:
    """Each of the inputs ``paths`` by device and inode (links, ``..`` and hard links lead to the same) and by real
    path (an input not there yet), mapped to the name it was given as: what :func:`refuse_input` looks an output up
    in. ``-``, empty names and None are left out."""
    ids: InputIds = {}
    for path in paths:
        text = "" if path is None else os.fspath(path)
        if text in ("", "-"):
            continue
        with contextlib.suppress(OSError):
            info = os.stat(text)
            ids.setdefault((info.st_dev, info.st_ino), text)
        ids.setdefault(os.path.realpath(text), text)
    return ids


def refuse_input(path: StrPath, shown: str, option: str | None = None, *, inputs: InputIds | None = None) -> None:
    """``UsageError`` when ``path`` (followed) is one of ``inputs`` (:func:`input_ids`) or of the inputs
    :func:`protect_inputs` recorded: the one identity check of an output, one ``stat``, done before any work.
    ``shown`` names the output in the message, after ``option`` when given."""
    inputs = inputs or {}
    try:
        info = os.stat(path)
    except OSError:  # nothing there yet: only a name can be an input's
        source = inputs.get(os.path.realpath(path))
    else:
        key = (info.st_dev, info.st_ino)
        source = inputs.get(key) or _PROTECTED.get(key)
    if source is not None:
        prefix = f"{option} {shown}" if option else shown
        raise UsageError(f"{prefix}: is the input {source}; writing it would destroy the input")


def non_regular_kind(path: StrPath, *, named: bool = False) -> str | None:
    """What is at ``path`` itself when it is not a regular file ("a symbolic link", "a folder", "not a regular
    file": a FIFO, a device, a socket; with ``named``, those too by name, as :func:`file_kind` briefly says: "a
    FIFO", "a device", "a socket"), else None (a regular file, or nothing). One ``lstat``: never follows a link or
    opens."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return None
    except OSError as error:
        if error.errno == errno.ENAMETOOLONG:  # nothing can be there (the name's length is refused where it matters)
            return None
        raise
    if stat.S_ISREG(mode):
        return None
    if named or stat.S_ISLNK(mode) or stat.S_ISDIR(mode):
        return file_kind(mode, brief=True)
    return "not a regular file"


def _refuse_non_regular(path: str) -> None:
    """``UsageError`` when something other than a regular file is at ``path`` itself: a file a command writes
    inside a folder is never written through a link, nor into a FIFO or a device."""
    kind = non_regular_kind(path)
    if kind is not None:
        raise UsageError(f"{path}: is {kind}; bitext-hf writes only regular files there (remove it first)")


def writes_in_place(path: StrPath) -> bool:
    """Whether :func:`atomic_output` writes ``path`` in place, so that no regular file appears: stdout, an existing
    non-regular file (FIFO, device), or an existing path that names a standard stream or a descriptor
    (``/dev/stdout``, ``/dev/fd/N``, ``/proc/self/fd/N``: it may resolve to the regular file the stream is
    redirected to, and replacing that file would detach it from the shell). Any other path under /dev or /proc
    (a new file in ``/dev/shm``) is a regular file to be. The one rule of what is a stream: the writers and
    :func:`bitext_hf.io.tables.output_format` follow it."""
    path = os.fspath(path)
    if path == "-":
        return True
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return not stat.S_ISREG(mode) or _STD_STREAM.fullmatch(os.path.abspath(path)) is not None


# numpy writes arrays to a real file with C's fwrite, which drops errno: a short write is all it reports.
_SHORT_WRITE = re.compile(r"\d+ requested and \d+ written")


def _errno_of_short_write(folder: str) -> int:
    """Why a write came up short, from what the file system says now: full (or over quota for us) or not."""
    try:
        space = os.statvfs(folder)
    except OSError:
        return errno.EIO
    return errno.ENOSPC if space.f_bavail == 0 or space.f_favail == 0 else errno.EIO


def storage_error(path: StrPath, error: OSError, *, replaced: bool) -> OutputWriteError | None:
    """The one-line error of a failed write, or None for an error that is not the storage's (re-raised as is).
    Every failure of stdout but a reader that went away (EPIPE, a quiet stop in the CLI) is the output's."""
    if isinstance(error, OutputWriteError):
        return None  # already one line (a nested output's, or stdout's): passed on as it is
    code = error.errno
    to_stdout = str(path) == "-" or own_descriptor(os.fspath(path)) == 1
    if code is None and _SHORT_WRITE.fullmatch(str(error)):
        code = _errno_of_short_write(os.path.dirname(os.path.abspath(os.fspath(path))))
    reason = _WRITE_ERRNOS.get(code or -1)
    if reason is None and to_stdout and code != errno.EPIPE:
        reason = error.strerror or str(error) or type(error).__name__
    if reason is None:
        return None
    tail = "nothing was written" if replaced else "the output is incomplete"
    shown = "writing to stdout failed" if to_stdout else _display(path)
    wrapped = OutputWriteError(f"{shown}: {reason}; {tail}")  # one line: no "[Errno N]" prefix
    wrapped.errno = code
    return wrapped


class _CheckedStdout:
    """``sys.stdout`` while a command runs: a failed write or flush (a full device, an I/O error) is an
    :class:`OutputWriteError` saying so (exit 1), as with ``--out -``, not an ``OSError`` that the CLI could only
    report as unexpected; a reader that went away stays a ``BrokenPipeError``. Everything else (``buffer``,
    ``fileno``, ``isatty``) is the stream's own."""

    def __init__(self, stream: IO[str]) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except OSError as error:
            raise storage_error("-", error, replaced=False) or error from None

    def flush(self) -> None:
        try:
            self._stream.flush()
        except OSError as error:
            raise storage_error("-", error, replaced=False) or error from None

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


@contextlib.contextmanager
def checked_stdout() -> Iterator[None]:
    """Within the block, a failed write to stdout is an ``OutputWriteError`` (see :class:`_CheckedStdout`); what is
    still buffered is flushed at its end, so that a failure is reported by the command and not lost at exit. A
    process started without a stdout (``>&-``: ``sys.stdout`` is None) keeps Python's way, printing nothing; only
    ``--out -`` is refused then (:func:`atomic_output`)."""
    original = sys.stdout
    if original is None:
        yield
        return
    checked = _CheckedStdout(original)
    sys.stdout = checked
    try:
        yield
        checked.flush()
    finally:
        if sys.stdout is checked:
            sys.stdout = original


def own_descriptor(path: StrPath) -> int | None:
    """The descriptor of this process that ``path`` names (``/dev/stdout``: 1, ``/dev/stderr``: 2, ``/dev/fd/N``,
    ``/proc/self/fd/N`` or ``/proc/<this pid>/fd/N``: N), else None (``-`` included). What :func:`atomic_output`
    writes through that descriptor, so ``own_descriptor(path) == 1`` is an output that goes to stdout."""
    path = os.fspath(path)
    match = _STD_STREAM.fullmatch(os.path.abspath(path))
    if match is None:
        return None
    if match.group(1) in ("stdout", "stderr"):
        return 1 if match.group(1) == "stdout" else 2
    if match.group(3) not in (None, "self", str(os.getpid())):
        return None  # another process's descriptor: written as the path it is
    return int(match.group(2) or match.group(4))


def open_arguments(mode: str) -> dict:
    return {} if "b" in mode else {"encoding": "utf-8", "newline": ""}


@contextlib.contextmanager
def _direct_output(path: str, mode: str) -> Iterator[IO]:
    """Write straight to stdout, a FIFO or a device: streaming, never replaced."""
    descriptor = own_descriptor(path)
    try:
        if path == "-" or descriptor == 1:
            if sys.stdout is None:  # started with descriptor 1 closed (`>&-`)
                raise OutputWriteError("writing to stdout failed: stdout is closed; nothing was written")
            stream = sys.stdout.buffer if "b" in mode else sys.stdout
            yield stream
            stream.flush()
        elif descriptor is not None:
            # open("/dev/stdout") would reopen the file a descriptor is redirected to, at offset 0 and truncated
            # ("w"): what the process wrote before, and writes it makes after, would overwrite each other. A
            # duplicate of the descriptor shares its offset and append flag instead.
            sys.stdout.flush()
            sys.stderr.flush()
            with os.fdopen(os.dup(descriptor), mode, **open_arguments(mode)) as handle:
                yield handle
        else:
            with open(path, mode, **open_arguments(mode)) as handle:
                yield handle
    except OSError as error:
        raise storage_error(path, error, replaced=False) or error from None


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
    elif writes_in_place(path):
        with _direct_output(path, mode) as handle:
            yield handle
        return
    # Following a symlink the user named: its target gets the new content, the link stays.
    target = os.path.realpath(path) if follow_symlinks else os.path.abspath(path)
    refuse_input(target, path)
    folder, name = os.path.split(target)
    if not os.path.isdir(folder):
        raise FileNotFoundError(errno.ENOENT, f"output folder does not exist: {os.path.dirname(path) or '.'}")
    remove_leftovers(folder, name)
    try:
        kept_mode = stat.S_IMODE(os.stat(target).st_mode)
    except FileNotFoundError:
        kept_mode = None
    temp = temp_path(folder, name)
    register_temp(temp)
    try:
        # os.open applies the umask to 0o666, as any new file gets (mkstemp would force 0o600).
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o666)
        if kept_mode is not None:
            os.fchmod(fd, kept_mode)
        with os.fdopen(fd, mode, **open_arguments(mode)) as handle:
            yield handle
            # On disk before the rename: a crash then leaves the old file or the new one, never an empty one, and
            # some file systems (NFS, quotas) report a full disk only here.
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, target)
    except BaseException as error:
        # Classified before the temp file goes: a short write is told apart by the space the file took.
        wrapped = storage_error(path, error, replaced=True) if isinstance(error, OSError) else None
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp)
        if wrapped is not None:
            raise wrapped from None
        raise
    finally:
        unregister_temp(temp)


def folder_is_writable(folder: str) -> bool:
    """Create and remove a file: the only test that holds for root, read-only mounts and ACLs alike."""
    try:
        fd, name = tempfile.mkstemp(prefix=f"{TEMP_MARK}probe-", dir=folder)
    except OSError:
        return False
    os.close(fd)
    with contextlib.suppress(OSError):
        os.unlink(name)
    return True


def check_writable_folder(folder: str, prefix: str, shown: str) -> None:
    """``folder`` (real; ``shown`` as the user wrote it) exists, is a folder and is writable; else a ``UsageError``
    after ``prefix`` (the option and the output)."""
    try:
        mode = os.stat(folder).st_mode
    except FileNotFoundError:
        raise UsageError(f"{prefix}: folder {shown} does not exist") from None
    except NotADirectoryError:
        raise UsageError(f"{prefix}: {shown} is not a folder") from None
    if not stat.S_ISDIR(mode):
        raise UsageError(f"{prefix}: {shown} is not a folder")
    if not folder_is_writable(folder):
        raise UsageError(f"{prefix}: folder {shown} is not writable")


def check_name_length(path: str, shown: str, folder: str) -> None:
    """The name of ``path`` fits the file system of ``folder`` (an existing folder); else a ``UsageError`` after
    ``shown``."""
    name_bytes = len(os.fsencode(os.path.basename(path)))
    try:
        limit = os.pathconf(folder, "PC_NAME_MAX")
    except (OSError, ValueError):  # the file system does not say
        limit = name_bytes
    if name_bytes > limit:
        raise UsageError(f"{shown}: the name is {name_bytes} bytes, longer than the {limit} the folder allows")


def check_named_output(path: StrPath | None, option: str = "--out") -> str:
    """The first checks of an output a user names, before it is told to be a stream or a file: not empty, not an
    existing folder (``UsageError``). Returns the path as text."""
    text = "" if path is None else os.fspath(path)
    if not text.strip():
        raise UsageError(f"{option}: empty output path")
    if text != "-" and os.path.isdir(text):
        raise UsageError(f"{option} {text}: is a directory; give a file path")
    return text


def check_output_path(path: StrPath | None, *, inputs: Iterable[StrPath | None] = (), option: str = "--out") -> None:
    """Refuse an output path that cannot work, before any work is done (``UsageError``, exit 2).

    Refused: an empty path, an existing directory, a parent folder that is missing, not a folder or not writable,
    and a path that is (through symlinks, ``..`` or a hard link) one of ``inputs`` or of the inputs
    :func:`protect_inputs` recorded. ``-`` (stdout) and existing non-regular files (``/dev/null``, a FIFO) are
    accepted.
    """
    text = check_named_output(path, option)
    if writes_in_place(text):
        return
    folder = os.path.dirname(os.path.realpath(text))
    check_writable_folder(folder, f"{option} {text}", os.path.dirname(text) or ".")
    check_name_length(text, f"{option} {text}", folder)
    refuse_input(text, text, option, inputs=input_ids(inputs))


def check_inputs_and_output(out: StrPath | None, inputs: Iterable[StrPath | None]) -> None:
    """Cheap checks before any reading: at most one input is stdin (``-``), and ``out`` (when given) is a writable
    path that is none of the inputs (writing it would destroy that input). The inputs stay protected for the rest
    of the command: no file it writes (sidecar, shards, cache entries) may replace one (``protect_inputs``)."""
    inputs = tuple(inputs)
    stdin = [path for path in inputs if path == "-"]
    if len(stdin) > 1:
        raise UsageError("only one input can be read from stdin ('-')")
    protect_inputs(inputs)
    if out is not None:
        check_output_path(out, inputs=inputs, option="--out")
