"""The ``bitext-hf`` command line: encode, mine, score and eval.

Exit codes: 0 success; 2 wrong usage; 3 bad input data (the message names the file and line); 4 an encoder that
cannot be loaded; 1 anything else. Results go to stdout, progress and warnings to stderr, files are written
atomically (complete or not at all).
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Sequence

from bitext_hf.cli.parser import build_parser
from bitext_hf.errors import EXIT_DATA, EXIT_ENCODER, EXIT_ERROR, EXIT_OK, EXIT_USAGE, BitextError

__all__ = ["EXIT_DATA", "EXIT_ENCODER", "EXIT_ERROR", "EXIT_OK", "EXIT_USAGE", "build_parser", "main"]


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not args.command:
        parser.print_help()
        return EXIT_USAGE
    logging.basicConfig(
        level=logging.WARNING if args.quiet else logging.INFO, format="%(levelname)s %(name)s: %(message)s"
    )
    for noisy in ("httpx", "httpcore", "urllib3", "huggingface_hub", "datasets", "evaluate"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    if getattr(args, "k", 1) < 1:
        parser.error("--k must be >= 1")
    if getattr(args, "batch_size", 1) < 1:
        parser.error("--batch-size must be >= 1")

    try:
        return args.func(args)
    except BitextError as error:
        print(f"bitext-hf {args.command}: error: {error}", file=sys.stderr)
        return error.exit_code
    except (ValueError, FileNotFoundError) as error:
        print(f"bitext-hf {args.command}: error: {error}", file=sys.stderr)
        return EXIT_DATA
    except KeyboardInterrupt:
        print("interrupted; no output file was written", file=sys.stderr)
        return 130
