"""Files that are small by nature (a sidecar, a shard manifest, a model's config), read whole and bounded.

:func:`read_small_file` measures the file before a byte is read and reads at most one byte past the bound, so a
multi-GB (or sparse) file put where such a file belongs is refused at once instead of read into memory; it opens
without blocking, so a FIFO there waits for no writer. The inputs of the commands are streamed and bounded by
:mod:`bitext_hf.io.inputs` instead (``--max-input-bytes``): these files have bounds of their own, far smaller.
"""

from __future__ import annotations

import json
import os
import stat

__all__ = [
    "MAX_CONFIG_BYTES",
    "SmallFileError",
    "file_kind",
    "read_regular_file",
    "read_small_file",
    "read_small_json",
    "regular_file_status",
]

# A model folder's JSON configs (config.json, tokenizer_config.json, modules.json) are kilobytes; the largest
# tokenizer configs, listing every added token, stay under a few MB.
MAX_CONFIG_BYTES = 64 << 20


class SmallFileError(ValueError):
    """A file that cannot be the small file expected: larger than its bound, or not a regular file. The message says
    why (not the path: callers name it)."""


def _mib(count: int) -> str:
    return f"{count / (1 << 20):,.0f} MiB" if count >= 1 << 20 else f"{count:,} bytes"


def _size_over(count: int, bound: int) -> str:
    """``count`` beside ``bound`` in words that differ: both in rounded MiB, or ``count`` in exact bytes where
    rounding would show two equal numbers (a file one byte over its bound)."""
    if _mib(count) == _mib(bound):
        return f"{count:,} bytes, more than the {_mib(bound)}"
    return f"{_mib(count)}, more than the {_mib(bound)}"


def read_small_file(path: str | os.PathLike, max_bytes: int) -> bytes:
    """The bytes of the regular file ``path``, at most ``max_bytes`` of them.

    Raises:
        SmallFileError: the file holds more (measured before reading, and again while reading: it may grow), or
            it is not a regular file (a FIFO, a device).
        OSError: it cannot be opened or read.
    """
    # O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer; a regular file ignores the flag.
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    status = os.fstat(fd)
    if not stat.S_ISREG(status.st_mode):  # checked before fdopen, which would fail on a folder and leak the fd
        os.close(fd)
        raise SmallFileError("not a regular file")
    with os.fdopen(fd, "rb") as handle:
        if status.st_size > max_bytes:
            raise SmallFileError(f"{_size_over(status.st_size, max_bytes)} such a file can hold")
        data = handle.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise SmallFileError(f"more than the {_mib(max_bytes)} such a file can hold (it grew while being read)")
    return data


def read_small_json(path: str | os.PathLike, max_bytes: int) -> object:
    """The JSON value of a small file (see :func:`read_small_file`; UTF-8, a BOM allowed as ``json`` allows it).

    Raises:
        SmallFileError, OSError: as :func:`read_small_file` says; ValueError: not JSON (or not UTF-8);
        RecursionError: JSON nested past the interpreter's limit.
    """
    return json.loads(read_small_file(path, max_bytes))


# Each kind of file in words; the second word is the brief one a refusal of an output uses ("is a device").
_KINDS = (
    (stat.S_ISREG, "a regular file", "a file"),
    (stat.S_ISDIR, "a folder", "a folder"),
    (stat.S_ISFIFO, "a FIFO", "a FIFO"),
    (stat.S_ISSOCK, "a socket", "a socket"),
    (stat.S_ISCHR, "a character device", "a device"),
    (stat.S_ISBLK, "a block device", "a device"),
    (stat.S_ISLNK, "a symbolic link", "a symbolic link"),
)


def file_kind(mode: int, *, brief: bool = False) -> str:
    """What a file of ``mode`` (``st_mode``) is, in words: "a regular file", "a folder", "a FIFO", "a socket", "a
    character device", "a block device", "a symbolic link"; ``brief``: "a file" and "a device" for the regular file
    and both devices. The one table of these words (:func:`bitext_hf.io.outputs.non_regular_kind` uses it too)."""
    for test, kind, brief_kind in _KINDS:
        if test(mode):
            return brief_kind if brief else kind
    return "not a file"


def regular_file_status(path: str | os.PathLike) -> os.stat_result:
    """The status of ``path`` (a link followed), checked to be a regular file without opening it: a FIFO is never
    opened (which would wait for a writer, or wake one), nor a device (``/dev/zero``, a tape).

    Raises:
        FileNotFoundError: nothing there (or it went away).
        SmallFileError: ``"a symbolic link to nothing"``, or ``"not a regular file (a FIFO)"`` (a folder, a device,
            a socket).
        OSError: it cannot be looked at (permission denied).
    """
    try:
        status = os.stat(path)
    except FileNotFoundError:
        if os.path.islink(path):
            raise SmallFileError("a symbolic link to nothing") from None
        raise
    if not stat.S_ISREG(status.st_mode):
        raise SmallFileError(f"not a regular file ({file_kind(status.st_mode)})")
    return status


def read_regular_file(path: str | os.PathLike, max_bytes: int) -> bytes:
    """:func:`read_small_file` after :func:`regular_file_status`: what is not a regular file is refused (with what it
    is) before it is opened, and the file's size before a byte is read.

    Raises:
        SmallFileError, FileNotFoundError, OSError: as those two functions say.
    """
    regular_file_status(path)
    return read_small_file(path, max_bytes)
