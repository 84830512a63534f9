"""The package's error classes, one per documented exit code of the command line.

Each carries ``exit_code``: the CLI prints the message as one line and exits with it (``--debug`` or
``BITEXT_HF_DEBUG=1`` shows the traceback instead). Library callers catch them as the built-in types they extend.
"""

from __future__ import annotations

__all__ = [
    "EXIT_DATA",
    "EXIT_ENCODER",
    "EXIT_ERROR",
    "EXIT_OK",
    "EXIT_USAGE",
    "BitextError",
    "DataValidationError",
    "EncoderLoadError",
    "OutputWriteError",
    "UsageError",
]

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_DATA, EXIT_ENCODER = 0, 1, 2, 3, 4


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
