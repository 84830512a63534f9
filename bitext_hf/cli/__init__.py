"""The ``bitext-hf`` command line: encode, mine, score and eval.

Exit codes (README "Command line"): 0 success; 1 any other error, a failed output write included; 2 wrong usage;
3 bad input data (the message names the file and line); 4 an encoder that cannot be loaded; 130 interrupted.
Every error is one line on stderr (``--debug`` or ``BITEXT_HF_DEBUG=1`` re-raises it to show the traceback).
Results go to stdout, progress and warnings to stderr, files are written atomically (complete or not at all).
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Sequence

from bitext_hf.cli.parser import build_parser
from bitext_hf.errors import EXIT_DATA, EXIT_ENCODER, EXIT_ERROR, EXIT_OK, EXIT_USAGE, BitextError

__all__ = ["EXIT_DATA", "EXIT_ENCODER", "EXIT_ERROR", "EXIT_INTERRUPTED", "EXIT_OK", "EXIT_USAGE", "main"]

EXIT_INTERRUPTED = 130  # 128 + SIGINT, as shells report a Ctrl-C


def _debug_requested(args) -> bool:
    return bool(getattr(args, "debug", False)) or os.environ.get("BITEXT_HF_DEBUG", "") not in ("", "0")


def _notes(error: BaseException) -> str:
    """What the code that saw the error added to it (``add_note``: what was kept, how to continue), one line."""
    return " ".join(" ".join(getattr(error, "__notes__", ())).split())


def _describe(error: Exception) -> tuple[int, str]:
    """Exit code and one-line message of an error."""
    message = " ".join(f"{error} {_notes(error)}".split()) or type(error).__name__
    if isinstance(error, BitextError):
        return error.exit_code, message
    # Library checks that predate the error classes raise ValueError for bad data (NaN embeddings, mismatched
    # rows), and an input that vanished between the checks and the reading is a data problem too.
    if isinstance(error, ValueError | FileNotFoundError | IsADirectoryError | UnicodeDecodeError):
        return EXIT_DATA, message
    return EXIT_ERROR, f"{type(error).__name__}: {message} (run with --debug for the traceback)"


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)  # the command as typed (mine records it)
    if not args.command:
        parser.print_help()
        return EXIT_USAGE
    logging.basicConfig(
        level=logging.WARNING if args.quiet else logging.INFO, format="%(levelname)s %(name)s: %(message)s"
    )
    for noisy in ("httpx", "httpcore", "urllib3", "huggingface_hub", "datasets", "evaluate"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    try:
        return args.func(args)
    except KeyboardInterrupt as interrupt:
        kept = _notes(interrupt) or "no output file was written"
        print(f"bitext-hf {args.command}: interrupted; {kept}", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader of stdout went away (`bitext-hf mine ... --out - | head`): stop quietly, and keep Python
        # from reporting the same broken pipe again when it flushes stdout at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_ERROR
    except Exception as error:
        if _debug_requested(args):
            raise
        code, message = _describe(error)
        print(f"bitext-hf {args.command}: error: {message}", file=sys.stderr)
        return code
    finally:
        from bitext_hf.io import protect_inputs

        protect_inputs(())  # the next command (in this process: tests, notebooks) has inputs of its own
