"""The ``bitext-hf`` command line: encode, mine, align, score and eval.

Exit codes (docs/exit-codes.md): 0 success; 1 any other error, a failed output write included (a stdout whose encoding
cannot represent the text, too); 2 wrong usage; 3 bad input data (the message names the file and line); 4 an encoder
that cannot be loaded; 130 interrupted. Every error is one line on stderr, its control characters escaped (``--debug``
or ``BITEXT_HF_DEBUG=1`` re-raises it to show the traceback).
Results go to stdout, progress and warnings to stderr, files are written atomically (complete or not at all).
The libraries' own logs and progress bars (faiss, transformers, datasets) are shown with ``-v`` only.
``-q``, ``-v``, ``--debug`` and ``--threads N`` go before the command's name or after it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Sequence

# Only what is light here: the parser's imports (the jobs' configs, numpy: most of a second) are made by main, where a
# Ctrl-C that comes while they run ends the command as any other does (130, one line), not with a traceback.
from bitext_hf.errors import (
    EXIT_DATA,
    EXIT_ENCODER,
    EXIT_ERROR,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    debug_requested,
    describe_error,
    error_notes,
)

__all__ = ["EXIT_DATA", "EXIT_ENCODER", "EXIT_ERROR", "EXIT_INTERRUPTED", "EXIT_OK", "EXIT_USAGE", "main"]

# What an interrupted command says when no note tells otherwise (a commit adds one when its outputs were written).
_NOTHING_WRITTEN = "no output file was written"

# The commands that encode or search, and so run thread pools; push and data start none of their own.
_COMMANDS_WITH_THREADS = frozenset({"encode", "mine", "align", "score", "eval"})


def _thread_limit(args):
    """``--threads`` (default: :func:`~bitext_hf.threads.command_threads`, the CPUs this process may use that other
    work leaves idle) over every thread pool of the command, set once here and restored when the command ends (in
    this process: tests, notebooks)."""
    if args.command not in _COMMANDS_WITH_THREADS:
        return contextlib.nullcontext()  # nothing to cap, and torch is not imported for nothing
    from bitext_hf.threads import command_threads, limit_threads

    return limit_threads(args.threads or command_threads())


def main(argv: Sequence[str] | None = None) -> int:
    try:
        from bitext_hf.cli.parser import build_parser

        parser = build_parser()
        args = parser.parse_args(argv)
    except KeyboardInterrupt:
        print(f"bitext-hf: interrupted; {_NOTHING_WRITTEN}", file=sys.stderr)
        return EXIT_INTERRUPTED
    from bitext_hf.io.logs import library_logs  # imported by the parser already, as the four below
    from bitext_hf.io.outputs import checked_stdout
    from bitext_hf.io.terminal import escape_controls
    from bitext_hf.jobs.option_fields import check_value
    from bitext_hf.jobs.options import THREADS

    args.argv = list(sys.argv[1:] if argv is None else argv)  # the command as typed (mine records it)
    if not args.command:
        parser.print_help()
        return EXIT_USAGE
    verbose = getattr(args, "verbose", False)
    quiet = getattr(args, "quiet", False) and not verbose
    logging.basicConfig(level=logging.WARNING if quiet else logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    try:
        # Checked before the thread limit is set (the configs check it again, for Python callers).
        check_value("threads", getattr(args, "threads", None), int | None, THREADS)
        # The command's own lines only; the libraries' logs and bars with -v (bitext_hf.io.logs).
        # A failed write to stdout is an output error (exit 1) wherever the command prints (bitext_hf.io.outputs).
        with library_logs(verbose), _thread_limit(args), checked_stdout():
            return args.func(args)
    except KeyboardInterrupt as interrupt:
        kept = error_notes(interrupt) or _NOTHING_WRITTEN
        print(f"bitext-hf {args.command}: interrupted; {kept}", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader of stdout went away (`bitext-hf mine ... --out - | head`): stop quietly, and keep Python
        # from reporting the same broken pipe again when it flushes stdout at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_ERROR
    except Exception as error:
        if debug_requested(getattr(args, "debug", False)):
            raise
        # Text that cannot be encoded is an output that cannot be written (1), never bad input (3): an input that
        # is not UTF-8 is a UnicodeDecodeError, which its reader reports naming the file and line.
        code, message = describe_error(error)
        # One line, and nothing for the terminal to act on: a message may quote data or a file name.
        print(f"bitext-hf {args.command}: error: {escape_controls(message)}", file=sys.stderr)
        return code
    finally:
        from bitext_hf.io import protect_inputs

        protect_inputs(())  # the next command (in this process: tests, notebooks) has inputs of its own
