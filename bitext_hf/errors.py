"""The package's error classes, one per documented exit code of the command line.

Each carries ``exit_code``: the CLI prints the message as one line and exits with it (``--debug`` or
``BITEXT_HF_DEBUG=1`` shows the traceback instead). Library callers catch them as the built-in types they extend.
"""

from __future__ import annotations

import codecs
import os
import sys

__all__ = [
    "EXIT_DATA",
    "EXIT_ENCODER",
    "EXIT_ERROR",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_USAGE",
    "BitextError",
    "DataValidationError",
    "EncoderLoadError",
    "OutputWriteError",
    "UsageError",
    "debug_requested",
    "describe_error",
    "error_notes",
]

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_DATA, EXIT_ENCODER = 0, 1, 2, 3, 4
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as shells report a Ctrl-C


class BitextError(Exception):
    """Base of the errors the CLI reports as one line."""

    exit_code = EXIT_ERROR


class UsageError(BitextError, ValueError):
    """Options that cannot work together or an unusable output path (exit 2)."""

    exit_code = EXIT_USAGE


class DataValidationError(BitextError, ValueError):
    """Input data that cannot be used as is; the message names the file and line (exit 3)."""

    exit_code = EXIT_DATA


class EncoderLoadError(BitextError, RuntimeError):
    """An encoder or model could not be loaded (offline, missing or corrupt files, unknown type) (exit 4)."""

    exit_code = EXIT_ENCODER


class OutputWriteError(BitextError, OSError):
    """Writing an output failed (a full disk, an I/O error); nothing partial was left behind (exit 1)."""

    exit_code = EXIT_ERROR


def debug_requested(flag: bool = False) -> bool:
    """Whether to show tracebacks instead of one-line errors: ``flag`` (``--debug``) or ``BITEXT_HF_DEBUG``."""
    return bool(flag) or os.environ.get("BITEXT_HF_DEBUG", "") not in ("", "0")


def error_notes(error: BaseException) -> str:
    """What the code that saw the error added to it (``add_note``: what was kept, how to continue), one line."""
    return " ".join(" ".join(getattr(error, "__notes__", ())).split())


def describe_error(error: BaseException, *, debug_hint: str = "run with --debug for the traceback") -> tuple[int, str]:
    """Exit code and one-line message of an error, the one classification of the command line and the recipes.

    A :class:`BitextError` carries its code; text an output's encoding cannot represent is a failed write (1), with
    how to fix it where the output is stdout; ``ValueError`` (library checks that predate the error classes: NaN
    embeddings, mismatched rows), a vanished input and undecodable text are bad data (3); anything else is 1 and
    its message ends with ``debug_hint``. Notes added to the error (``add_note``) end the line."""
    message = " ".join(f"{error} {error_notes(error)}".split()) or type(error).__name__
    if isinstance(error, BitextError):
        return error.exit_code, message
    if isinstance(error, UnicodeEncodeError):  # a ValueError, but of an output: the write failed, not the data
        return _unencodable(error)
    if isinstance(error, ValueError | FileNotFoundError | IsADirectoryError | UnicodeDecodeError):
        return EXIT_DATA, message
    return EXIT_ERROR, f"{type(error).__name__}: {message} ({debug_hint})"


def _same_codec(first: str | None, second: str | None) -> bool:
    try:
        return codecs.lookup(first or "").name == codecs.lookup(second or "").name
    except LookupError:
        return False


def _unencodable(error: UnicodeEncodeError) -> tuple[int, str]:
    """Exit 1 and the line for text that an output's encoding cannot represent; for stdout (``PYTHONIOENCODING=ascii``,
    a non-UTF-8 locale), how to fix it."""
    character = error.object[error.start : error.start + 1] if isinstance(error.object, str) else ""
    shown = f"{character!r} (U+{ord(character):04X})" if character else "a character"
    stdout = sys.__stdout__ if sys.stdout is None else sys.stdout
    if _same_codec(error.encoding, getattr(stdout, "encoding", None)):
        return EXIT_ERROR, (
            f"writing to stdout failed: its encoding ({error.encoding}) cannot represent the text ({shown}); what "
            "came before it was written, nothing after. Set PYTHONIOENCODING=utf-8 (or a UTF-8 locale, e.g. "
            "LANG=C.UTF-8), or write the output to a file"
        )
    return EXIT_ERROR, f"writing an output failed: {error.encoding} cannot represent {shown} ({error.reason})"
