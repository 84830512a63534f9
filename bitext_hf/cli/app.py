"""``bitext-hf app``: the review app on a pairs file (:mod:`bitext_hf.app`), or, with ``--export``, the export of
a review's decisions without a browser."""

from __future__ import annotations

import argparse

from bitext_hf.errors import EXIT_OK

__all__ = ["EPILOG_APP", "add_app_command", "cmd_app"]

EPILOG_APP = """examples:
  bitext-hf app pairs.tsv                           # http://127.0.0.1:7860, this machine only
  bitext-hf app pairs.parquet --port 8080
  bitext-hf app pairs.tsv --export kept.tsv         # the review's decisions applied, no browser

PAIRS is the output of `mine`, `score` or `align` (.tsv, .csv, .jsonl, .parquet): the pairs sorted and filtered by
score, quality (the pair-quality column, when the file has it), length ratio and language ID; the counts kept, the
estimated precision and expected correct pairs as the threshold moves; a pair rejected by hand. The decisions (the
filters and the rejected rows) are kept in PAIRS.review.json beside the input, written on every change, and read
back when the app opens the same file again; the input is never written. Export writes the kept pairs in file
order; in the input's own format the kept lines are copied byte for byte. Needs the app extra:
pip install "bitext-hf[app]".

exit codes:
  0  the app was stopped (Ctrl-C), or the export was written
  1  the export could not be written (a full disk)
  2  Gradio is not installed, or an unusable option or export path (the input itself, a folder, a FIFO)
  3  the pairs cannot be read (the file and line named), or PAIRS.review.json is not this file's decisions
"""


def add_app_command(commands, shared: argparse.ArgumentParser) -> argparse.ArgumentParser:
    parser = commands.add_parser(
        "app",
        parents=[shared],
        help="review pairs in the browser before publishing them: filter, reject, export (the app extra)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=EPILOG_APP,
    )
    parser.add_argument("pairs", help="pairs written by mine, score or align (.tsv, .csv, .jsonl, .parquet)")
    parser.add_argument("--host", default="127.0.0.1", help="address to serve on (default 127.0.0.1: this machine)")
    parser.add_argument("--port", type=int, default=None, help="port (default: the first free from 7860)")
    parser.add_argument(
        "--export", metavar="OUT", help="write the kept pairs to OUT (format from its extension) and exit"
    )
    parser.set_defaults(func=cmd_app)
    return parser


def cmd_app(args) -> int:
    from bitext_hf.app import PairsReview, launch

    if args.export:
        path, count = PairsReview(args.pairs).export(args.export)
        print(f"wrote {count:,} kept pairs to {path}")
        return EXIT_OK
    print("bitext-hf app: starting (Ctrl-C stops it)")
    launch(args.pairs, host=args.host, port=args.port, block=True)
    return EXIT_OK
