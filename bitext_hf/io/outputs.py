"""Outputs: a regular file appears complete or not at all (temp file and rename, umask honoured, temp removed on
error and on SIGTERM/SIGINT, leftovers of a killed run removed by the next one); anything else (``-`` for stdout,
a FIFO, a device, ``/dev/stdout``) is written directly and never replaced; a symlink the user names as ``--out``
is followed, not replaced, while files a command writes inside a folder (shards, manifests, cache entries) are
never written through a link or into anything but a regular file (``follow_symlinks=False``). Whatever the path,
no write replaces one of the running command's inputs (:func:`protect_inputs`, by device and inode). A run that
writes several files plans them in an :class:`OutputSet`: every path checked before the work, each file written to a
temporary beside its target, all committed together at the end (or none, and the earlier files left as they were).
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import secrets
import signal
import stat
import sys
import tempfile
import threading
from collections.abc import Iterable, Iterator
from typing import IO

from bitext_hf.errors import OutputWriteError, UsageError

__all__ = [
    "OutputSet",
    "atomic_output",
    "check_inputs_and_output",
    "check_output_path",
    "checked_stdout",
    "non_regular_kind",
    "protect_inputs",
    "refuse_input",
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


def refuse_input(path: StrPath, shown: str, option: str | None = None) -> None:
    """``UsageError`` when ``path`` (followed) is one of the inputs :func:`protect_inputs` recorded: for files a
    command will write into a folder, checked before any work."""
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
    except OSError as error:
        if error.errno == errno.ENAMETOOLONG:  # nothing can be there (the name's length is refused where it matters)
            return None
        raise
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
# Folders an OutputSet made for its files (removed with them, when still empty).
_ACTIVE_FOLDERS: dict[str, int] = {}
_ACTIVE_LOCK = threading.Lock()
_PREVIOUS_HANDLERS: dict[int, object] = {}
# Non-empty while an OutputSet commits (a marker, then the signals that came meanwhile, delivered after the commit).
_COMMITTING: list[int] = []


def _on_signal(signum: int, frame) -> None:
    if _COMMITTING:
        # A commit is renaming files (this thread blocks the signals; another thread received it): after it.
        _COMMITTING.append(signum)
        return
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
    for name, pid in sorted(_ACTIVE_FOLDERS.items(), reverse=True):
        if pid == os.getpid():
            with contextlib.suppress(OSError):
                os.rmdir(name)  # only when empty: what is in it is not this run's
    # Die of the signal as the default disposition would, so the parent sees the conventional status (143 / -15).
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def _register(temp: str, registry: dict[str, int] = _ACTIVE) -> None:
    """Remember a temp file (or, in ``_ACTIVE_FOLDERS``, a folder made for temp files); in the main thread (the only
    one that may set handlers), handle SIGTERM/SIGINT."""
    with _ACTIVE_LOCK:
        registry[temp] = os.getpid()
        if threading.current_thread() is not threading.main_thread():
            return
        for signum in (signal.SIGTERM, signal.SIGINT):
            previous = signal.getsignal(signum)
            # Ignored (nohup), set outside Python, or already ours: leave it.
            if previous in (signal.SIG_IGN, None) or previous is _on_signal:
                continue
            _PREVIOUS_HANDLERS[signum] = previous
            signal.signal(signum, _on_signal)


def _unregister(temp: str, registry: dict[str, int] = _ACTIVE) -> None:
    """Forget a temp file (or a folder); when none is left, give the signals back to their previous handlers."""
    with _ACTIVE_LOCK:
        registry.pop(temp, None)
        if _ACTIVE or _ACTIVE_FOLDERS or threading.current_thread() is not threading.main_thread():
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
    """The one-line error of a failed write, or None for an error that is not the storage's (re-raised as is).
    Every failure of stdout but a reader that went away (EPIPE, a quiet stop in the CLI) is the output's."""
    if isinstance(error, OutputWriteError):
        return None  # already one line (a nested output's, or stdout's): passed on as it is
    code = error.errno
    to_stdout = str(path) == "-" or _own_descriptor(os.fspath(path)) == 1
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
            raise _write_error("-", error, replaced=False) or error from None

    def flush(self) -> None:
        try:
            self._stream.flush()
        except OSError as error:
            raise _write_error("-", error, replaced=False) or error from None

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
    refuse_input(target, path)
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


def _check_writable_folder(folder: str, prefix: str, shown: str) -> None:
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
    if not _probe_writable(folder):
        raise UsageError(f"{prefix}: folder {shown} is not writable")


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
    _check_writable_folder(folder, f"{option} {text}", os.path.dirname(text) or ".")
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
    refuse_input(text, text, option)


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


# ----------------------------------------------------------------------------------------- several files at once


def _inside(path: str, folder: str) -> bool:
    """Whether ``path`` is ``folder`` or under it (both real, absolute paths)."""
    return path == folder or os.path.commonpath([path, folder]) == folder


def _kind_word(path: str) -> str:
    """What is at ``path`` itself, in words, for a refusal: "a FIFO", "a socket", "a device", "a symbolic link"..."""
    try:
        mode = os.lstat(path).st_mode
    except OSError:
        return "not there"
    for test, word in (
        (stat.S_ISLNK, "a symbolic link"),
        (stat.S_ISDIR, "a folder"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a device"),
        (stat.S_ISBLK, "a device"),
        (stat.S_ISREG, "a file"),
    ):
        if test(mode):
            return word
    return "not a regular file"


class OutputSet:
    """The files one run writes, planned before any work and committed together: all of them or none.

    1. Declare every file before the work (:meth:`add`; :meth:`add_folder` first for a folder that holds some, made
       when the first file is written if it does not exist). Each is checked then (``UsageError``, exit 2): at its
       name no symbolic link, FIFO, device, socket or folder (nothing is opened there: no hang); a parent folder that
       exists (or is declared) and is writable; none of the ``inputs`` (by device and inode: links, ``..`` and hard
       links too, as :func:`protect_inputs`' registry) and nothing in or equal to one of the ``input_folders``; no
       two outputs the same file.
    2. Write each into a temporary file beside its target: :meth:`open` gives a handle, :meth:`staged` a path for
       writers that take one (``np.save``, pyarrow, :func:`bitext_hf.io.tables.write_table`). Inside ``with``.
    3. :meth:`commit` renames every temporary onto its target, those added with ``last=True`` (a sidecar that
       vouches for the rest) after the others, with SIGINT and SIGTERM held until the renames are done (a signal
       that comes during the commit is delivered after it). A rename that fails puts back every file the commit had
       replaced (kept as a hard link, or renamed aside) and removes the new ones.

    Leaving the ``with`` block without a commit (an error, Ctrl-C), or SIGTERM before the commit, removes every
    temporary file and the folder the set made (when nothing else was put in it): the earlier state stays exactly,
    earlier outputs included. A new file gets ``0o666 & ~umask``, a replaced one keeps its mode. Files in a folder
    that the run does not declare are left as they are. A SIGKILL leaves temporaries, which the next write of the
    same target removes (as :func:`atomic_output`'s); one during the commit itself (a few renames) can leave some
    targets new and the others as they were. A single output that is a stream (``-``, a FIFO or device the
    user named) is not a set's: write it with :func:`atomic_output` (see :func:`writes_in_place`); a job's
    :class:`bitext_hf.jobs.base.JobOutputs` does so for the one ``--out`` a user names.

    >>> outputs = OutputSet(inputs=documents, input_folders=["de/"])
    >>> outputs.add_folder("aligned/")
    >>> for name in names:
    ...     outputs.add(f"aligned/{name}.align")
    >>> outputs.add("aligned/alignment.meta.json", last=True)
    >>> # ... the work ...
    >>> with outputs:
    ...     for name in names:
    ...         with outputs.open(f"aligned/{name}.align") as handle:
    ...             handle.write(beads[name])
    ...     with outputs.staged("aligned/table.parquet") as path:
    ...         table.to_parquet(path)
    ...     outputs.commit()
    """

    def __init__(
        self,
        *,
        inputs: Iterable[StrPath | None] = (),
        input_folders: Iterable[StrPath | None] = (),
        option: str = "--out",
    ) -> None:
        self._inputs = [os.fspath(path) for path in inputs if path is not None and os.fspath(path) not in ("", "-")]
        # Each input by device and inode (hard links, links, `..`) and by real path: one look-up per output.
        self._input_ids: dict[tuple[int, int] | str, str] = {}
        for source in self._inputs:
            with contextlib.suppress(OSError):
                info = os.stat(source)
                self._input_ids[(info.st_dev, info.st_ino)] = source
            self._input_ids[os.path.realpath(source)] = source
        self._input_folders = {
            os.path.realpath(path): os.fspath(path) for path in input_folders if path is not None and os.fspath(path)
        }
        self._option = option
        self._targets: dict[str, tuple[str, bool]] = {}  # real target -> (the path as given, last)
        self._given: dict[str, str] = {}  # the path as given -> real target
        self._folders: dict[str, str] = {}  # real folder -> as given, for the folders to make
        self._checked_folders: set[str] = set()
        self._temps: dict[str, str] = {}  # real target -> its temporary file
        self._made: list[str] = []  # folders made by this set, in order
        self._ready: set[str] = set()  # declared folders that exist now
        self._swept: set[str] = set()  # folders cleared of killed runs' leftovers
        self._committed = False

    # ------------------------------------------------------------------------------------------------- the plan

    @property
    def targets(self) -> list[str]:
        """Every file declared, as given, in the order of the commit (``last`` ones at the end)."""
        return [self._targets[key][0] for key in self._ordered(self._targets)]

    def _ordered(self, keys) -> list[str]:
        return [key for key in keys if not self._targets[key][1]] + [key for key in keys if self._targets[key][1]]

    @staticmethod
    def _check_name_length(real: str, shown: str, folder: str) -> None:
        """The name of ``real`` fits the file system of ``folder`` (an existing folder)."""
        name_bytes = len(os.fsencode(os.path.basename(real)))
        try:
            limit = os.pathconf(folder, "PC_NAME_MAX")
        except (OSError, ValueError):  # the file system does not say
            limit = name_bytes
        if name_bytes > limit:
            raise UsageError(f"{shown}: the name is {name_bytes} bytes, longer than the {limit} the folder allows")

    def _refuse_in_input_folder(self, real: str, shown: str, option: str | None) -> None:
        for folder, given in self._input_folders.items():
            if _inside(real, folder):
                where = "is the input folder" if real == folder else "is inside the input folder"
                prefix = f"{option} {shown}" if option else shown
                raise UsageError(
                    f"{prefix}: {where} {given}; an input folder is never written (its files would become inputs "
                    "of the next run): name another folder"
                )

    def _check_folder(self, folder: str, shown: str, option: str | None) -> None:
        """``folder`` (real) exists, is a folder and is writable."""
        if folder in self._checked_folders or folder in self._folders:
            return
        _check_writable_folder(folder, f"{option} {shown}" if option else shown, os.path.dirname(shown) or ".")
        self._checked_folders.add(folder)

    def add_folder(self, path: StrPath, *, option: str | None = None) -> str:
        """Declare the folder ``path`` that holds some of the outputs (a symbolic link the user names is followed).
        It exists and is a writable folder, or it does not exist and its parent is one (it is made when the first
        file is written into it, and removed again if the run ends without a commit); it is no input folder and is
        in none. Returns its real path."""
        option = self._option if option is None else option
        text = os.fspath(path)
        if not text.strip():
            raise UsageError(f"{option}: empty output path")
        prefix = f"{option} {text}" if option else text
        real = os.path.realpath(text)
        self._refuse_in_input_folder(real, text, option)
        if os.path.lexists(text):
            if not os.path.isdir(text):
                raise UsageError(
                    f"{prefix}: is {'a link to no folder' if os.path.islink(text) else _kind_word(text)}; "
                    "a folder is needed here (one file for each document): name a folder"
                )
            if not _probe_writable(real):
                raise UsageError(f"{prefix}: folder is not writable")
            self._checked_folders.add(real)
            return real
        self._check_folder(os.path.dirname(real), os.path.normpath(text), option)
        self._check_name_length(real, f"{prefix}", os.path.dirname(real))
        self._folders[real] = text
        return real

    def add(
        self, path: StrPath, *, last: bool = False, option: str | None = None, follow_symlinks: bool = False
    ) -> str:
        """Declare the output file ``path`` and check it (see the class). ``last``: committed after the others.
        ``follow_symlinks``: the output the user named (``--out``), where a link is followed, as
        :func:`atomic_output` does; files a run names itself (in a folder, a sidecar) never are. Returns its real
        path."""
        option = self._option if option is None else option
        text = os.fspath(path)
        prefix = f"{option} {text}" if option else text
        if follow_symlinks:
            check_output_path(text, inputs=self._inputs, option=option or "output")
            if _is_direct(text):
                raise UsageError(f"{prefix}: is a stream (stdout, a FIFO or a device), which no set of files holds")
            real = os.path.realpath(text)
        else:
            if not text.strip():
                raise UsageError(f"{option}: empty output path")
            kind = non_regular_kind(text)
            if kind is not None:
                raise UsageError(
                    f"{text}: is {_kind_word(text)}; bitext-hf writes only regular files there (remove it first)"
                )
            real = os.path.join(os.path.realpath(os.path.dirname(os.path.abspath(text))), os.path.basename(text))
            folder = os.path.dirname(real)
            self._check_folder(folder, text, None)
            # A folder still to make is on its parent's file system.
            self._check_name_length(real, text, os.path.dirname(folder) if folder in self._folders else folder)
            try:
                info = os.stat(real)
                source = self._input_ids.get((info.st_dev, info.st_ino))
            except OSError:
                source = None
            source = source or self._input_ids.get(real)
            if source is not None:
                raise UsageError(f"{text}: is the input {source}; writing it would destroy the input")
            refuse_input(real, text)
        self._refuse_in_input_folder(real, text, None if not follow_symlinks else option)
        if real in self._targets:
            raise UsageError(f"{text}: two outputs of this run have this name ({self._targets[real][0]}, {text})")
        self._targets[real] = (text, last)
        self._given[text] = real
        return real

    # ------------------------------------------------------------------------------------------------ the writes

    def _key(self, path: StrPath) -> str:
        text = os.fspath(path)
        if text not in self._given:
            raise ValueError(f"{text} was not declared in this OutputSet (add it before the work)")
        return self._given[text]

    def _stage(self, path: StrPath) -> tuple[str, str]:
        """A new temporary file's name beside the target of ``path`` (its folder made if declared so), registered
        so that SIGTERM removes it."""
        key = self._key(path)
        if key in self._temps:
            raise ValueError(f"{os.fspath(path)} is written twice in this OutputSet")
        folder, name = os.path.split(key)
        if folder in self._folders and folder not in self._ready:
            _register(folder, _ACTIVE_FOLDERS)  # before it exists: a signal right after mkdir removes it
            try:
                os.mkdir(folder)
            except FileExistsError:
                _unregister(folder, _ACTIVE_FOLDERS)  # made by someone else meanwhile: not ours to remove
                if not os.path.isdir(folder) or os.path.islink(folder):
                    raise UsageError(f"{self._folders[folder]}: is no longer a folder") from None
            except OSError as error:
                _unregister(folder, _ACTIVE_FOLDERS)
                raise _write_error(self._folders[folder], error, replaced=True) or error from None
            else:
                self._made.append(folder)
            self._ready.add(folder)
        if folder not in self._swept:
            self._sweep(folder)
        temp = os.path.join(folder, f"{_temp_prefix(name)}{os.getpid()}-{secrets.token_hex(4)}.tmp")
        _register(temp)
        self._temps[key] = temp
        return key, temp

    def _sweep(self, folder: str) -> None:
        """Delete what killed runs left of this set's targets in ``folder`` (their temporaries, and those of the
        writers given a temporary's path), as :func:`_remove_leftovers` does for one file, in one listing."""
        self._swept.add(folder)
        prefixes = {_temp_prefix(os.path.basename(key)) for key in self._targets if os.path.dirname(key) == folder}
        try:
            entries = os.listdir(folder)
        except OSError:
            return
        for entry in entries:
            match = _LEFTOVER.fullmatch(entry)
            if match is None or int(match.group(2)) == os.getpid() or _pid_alive(int(match.group(2))):
                continue
            start = match.group(1)
            if start in prefixes or any(start.startswith("." + prefix) for prefix in prefixes):
                with contextlib.suppress(OSError):
                    os.unlink(os.path.join(folder, entry))

    @contextlib.contextmanager
    def open(self, path: StrPath, mode: str = "w") -> Iterator[IO]:
        """A handle on the temporary file of the declared output ``path``, flushed to disk at the end of the block.
        A full disk or an I/O error raises ``OutputWriteError`` naming ``path``."""
        key, temp = self._stage(path)
        try:
            fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o666)
            with os.fdopen(fd, mode, **_open_kwargs(mode)) as handle:
                yield handle
                handle.flush()
                os.fsync(handle.fileno())
        except OSError as error:
            raise _write_error(self._targets[key][0], error, replaced=True) or error from None

    @contextlib.contextmanager
    def staged(self, path: StrPath) -> Iterator[str]:
        """The path of the temporary file of the declared output ``path``, for a writer that takes a path (it may
        write it in place or through :func:`atomic_output`). A failed write's ``OutputWriteError`` names ``path``."""
        key, temp = self._stage(path)
        shown = self._targets[key][0]
        try:
            yield temp
        except OSError as error:
            if isinstance(error, OutputWriteError):
                renamed = OutputWriteError(str(error).replace(temp, shown))
                renamed.errno = error.errno
                raise renamed from None
            raise _write_error(shown, error, replaced=True) or error from None
        if non_regular_kind(temp) is not None or not os.path.lexists(temp):
            raise OutputWriteError(f"{shown}: the writer left no regular file; nothing was written")

    def commit(self) -> list[str]:
        """Rename every written temporary file onto its target, ``last`` ones after the others, with SIGINT and
        SIGTERM held until the renames are done; a failed rename puts back every file the commit had replaced.
        Returns the targets written, as given. A signal held during the commit is delivered after it (Ctrl-C: a
        ``KeyboardInterrupt`` with a note that the outputs were written)."""
        if self._committed:
            raise ValueError("this OutputSet was committed already")
        keys = self._ordered([key for key in self._targets if key in self._temps])
        held = _hold_signals()
        try:
            self._rename_all(keys)
            self._committed = True
        finally:
            self._forget()
            _release_signals(held, self._committed)
        return [self._targets[key][0] for key in keys]

    def _rename_all(self, keys: list[str]) -> None:
        done: list[tuple[str, str | None]] = []  # (target, what it was before: a backup's name, or None)
        try:
            for key in keys:
                shown, temp = self._targets[key][0], self._temps[key]
                kind = non_regular_kind(key)
                if kind is not None:  # put there after the plan was checked
                    raise UsageError(
                        f"{shown}: is {_kind_word(key)}; bitext-hf writes only regular files there (remove it first)"
                    )
                backup = None
                if os.path.lexists(key):
                    os.chmod(temp, stat.S_IMODE(os.stat(key).st_mode))  # a replaced file keeps its mode
                    backup = f"{os.path.dirname(key)}/{_temp_prefix(os.path.basename(key))}{os.getpid()}-"
                    backup += f"{secrets.token_hex(4)}.tmp"
                    try:
                        os.link(key, backup)  # the old file stays in place until the rename replaces it
                    except OSError:
                        os.replace(key, backup)  # no hard links here: set aside
                    _register(backup)
                    self._temps[key + "\0backup"] = backup
                done.append((key, backup))  # before the rename: a failed one is put back too
                os.replace(temp, key)
        except BaseException as error:
            for target, backup in reversed(done):
                with contextlib.suppress(OSError):
                    if backup is None:
                        os.unlink(target)
                    else:
                        os.replace(backup, target)
            wrapped = _write_error(self._targets[key][0], error, replaced=True) if isinstance(error, OSError) else None
            if wrapped is not None:
                raise wrapped from None
            raise

    def _forget(self) -> None:
        """Remove every temporary file and backup left, and (without a commit) the folders this set made."""
        for temp in self._temps.values():
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temp)
            _unregister(temp)
        self._temps.clear()
        for folder in reversed(self._made):
            if not self._committed:
                with contextlib.suppress(OSError):
                    os.rmdir(folder)  # only when empty: what someone else put in it stays
            _unregister(folder, _ACTIVE_FOLDERS)
        self._made.clear()

    def discard(self) -> None:
        """Remove every temporary file and the folders this set made (when still empty); nothing is committed."""
        if not self._committed:
            self._forget()

    def __enter__(self) -> OutputSet:
        return self

    def __exit__(self, *exc_info) -> None:
        self.discard()


_HELD_SIGNALS = {signal.SIGINT, signal.SIGTERM}
# A temporary file's name: its prefix (up to the last marker; "." and the target's name before it), pid, token.
_LEFTOVER = re.compile(r"(\..*" + re.escape(_TEMP_MARK) + r")(\d+)-[0-9a-f]+\.tmp")


def _hold_signals() -> set | None:
    """Block SIGINT and SIGTERM in this thread, and have the handler of this module hold them for the others."""
    _COMMITTING.append(0)  # the marker: from here on the handler appends what it receives
    if hasattr(signal, "pthread_sigmask"):
        return signal.pthread_sigmask(signal.SIG_BLOCK, _HELD_SIGNALS)
    return None


def _release_signals(held: set | None, committed: bool) -> None:
    """Unblock the signals and deliver those that came meanwhile (Ctrl-C: ``KeyboardInterrupt``, noted)."""
    received = _COMMITTING[1:]
    _COMMITTING.clear()
    try:
        if held is not None:
            signal.pthread_sigmask(signal.SIG_SETMASK, held)  # a pending signal is delivered here
        for signum in dict.fromkeys(received):
            signal.raise_signal(signum)
    except KeyboardInterrupt as interrupt:
        if committed:
            interrupt.add_note("it came as the outputs were committed: they were all written")
        raise
