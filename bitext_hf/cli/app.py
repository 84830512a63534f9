"""``bitext-hf app``: the review app on a pairs file (:mod:`bitext_hf.app`), or, with ``--export``, the export of
a review's decisions without a browser."""

from __future__ import annotations

import argparse

from bitext_hf.errors import EXIT_OK

__all__ = ["EPILOG_APP", "add_app_command", "cmd_app"]

EPILOG_APP = """examples:
  bitext-hf app                                     # a page to open a file (a path, or uploaded)
  bitext-hf app pairs.tsv                           # http://127.0.0.1:7860, this machine only
  bitext-hf app pairs.parquet --port 8080
  bitext-hf app pairs.tsv --export kept.tsv         # the review's decisions applied, no browser
  bitext-hf app --src doc.en --tgt doc.de --alignment doc.align
  bitext-hf app --src book.en --tgt book.de --alignment book.tsv --export book.reviewed.tsv

PAIRS is the output of `mine`, `score` or `align` (.tsv, .csv, .jsonl, .parquet; align's .tmx too): the pairs
sorted and filtered by score, quality (the pair-quality column, when the file has it), length ratio and language ID;
the counts kept, the estimated precision and expected correct pairs as the threshold moves; a pair rejected by
hand. Without PAIRS or documents, a page to open a file (its path, or uploaded). The decisions (the
filters and the rejected rows) are kept in PAIRS.review.json beside the input, written on every change, and read
back when the app opens the same file again; the input is never written. Export writes the kept pairs in file
order; in the input's own format the kept lines are copied byte for byte, with a sidecar (PAIRS's, plus what the
review kept) that `bitext-hf push --pairs` turns into the dataset card.

With --src, --tgt and --alignment: the two documents side by side, bead by bead, as `align` aligned them (its
vecalign, tsv, jsonl or parquet output; read as align read them: --split, --clauses and the languages from
ALIGNMENT.meta.json, align's sidecar, unless given). Weak beads (a score
under the slider, a sentence without counterpart, an edited bead) are marked; a bead can be split (its first
sentences, then the rest), merged with the next, or rejected (its sentences then have no counterpart). The edits
are kept in ALIGNMENT.review.json and exported in align's formats (.align is vecalign).

Needs the app extra: pip install "bitext-hf[app]" (not for --export).

exit codes:
  0  the export was written
  1  the export could not be written (a full disk)
  2  Gradio is not installed, or an unusable option or export path (the input itself, a folder, a FIFO)
  3  the pairs, documents or alignment cannot be read (the file and line named), an alignment that does not
     cover the documents, or a .review.json that is not these files' decisions
  130  stopped by Ctrl-C (the review is kept in its .review.json, as the last decision left it)
"""


def add_app_command(commands, shared: argparse.ArgumentParser) -> argparse.ArgumentParser:
    parser = commands.add_parser(
        "app",
        parents=[shared],
        help="review pairs in the browser before publishing them: filter, reject, export (the app extra)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=EPILOG_APP,
    )
    parser.add_argument(
        "pairs", nargs="?", help="pairs written by mine, score or align (.tsv, .csv, .jsonl, .parquet, .tmx)"
    )
    parser.add_argument("--src", help="an alignment's source document (with --tgt and --alignment)")
    parser.add_argument("--tgt", help="an alignment's target document")
    parser.add_argument(
        "--alignment", help="the beads align wrote for --src and --tgt (.align, .tsv, .jsonl, .parquet)"
    )
    parser.add_argument(
        "--split",
        action="store_true",
        default=None,
        help="the documents are running text, aligned with --split (default: as the alignment's sidecar says)",
    )
    parser.add_argument(
        "--clauses",
        action="store_true",
        default=None,
        help="aligned with --split --clauses (default: as the alignment's sidecar says)",
    )
    parser.add_argument(
        "--src-lang", help="the source language (--split's rules; a TMX export's header; default: the sidecar's)"
    )
    parser.add_argument("--tgt-lang", help="the target language (default: the sidecar's)")
    parser.add_argument("--host", default="127.0.0.1", help="address to serve on (default 127.0.0.1: this machine)")
    parser.add_argument("--port", type=int, default=None, help="port (default: the first free from 7860)")
    parser.add_argument(
        "--export", metavar="OUT", help="write the kept pairs to OUT (format from its extension) and exit"
    )
    parser.set_defaults(func=cmd_app)
    return parser


def cmd_app(args) -> int:
    from bitext_hf.app import AlignmentReview, PairsReview, launch
    from bitext_hf.errors import UsageError

    documents = [args.src, args.tgt, args.alignment]
    if args.pairs and any(documents):
        raise UsageError("review a pairs file, or --src, --tgt and --alignment; not both")
    if any(documents) and not all(documents):
        raise UsageError("give all of --src, --tgt and --alignment (or a pairs file)")
    if not args.pairs and not any(documents):
        if args.export:
            raise UsageError("--export needs a pairs file, or --src, --tgt and --alignment")
        print("bitext-hf app: starting, with a page to open a file (Ctrl-C stops it)")
        try:
            launch(None, host=args.host, port=args.port, block=True)
        except KeyboardInterrupt as interrupt:
            interrupt.add_note("the app stopped; each review opened is kept in its file's .review.json")
            raise
        return EXIT_OK
    if args.pairs:
        review = PairsReview(args.pairs)
    else:
        review = AlignmentReview(
            args.src,
            args.tgt,
            args.alignment,
            split=args.split,
            clauses=args.clauses,
            src_lang=args.src_lang,
            tgt_lang=args.tgt_lang,
        )
    if args.export:
        path, count = review.export(args.export)
        print(f"wrote {count:,} {'kept pairs' if args.pairs else 'beads'} to {path}")
        return EXIT_OK
    print("bitext-hf app: starting (Ctrl-C stops it)")
    try:
        launch(review, host=args.host, port=args.port, block=True)
    except KeyboardInterrupt as interrupt:
        interrupt.add_note(f"the app stopped; the review is kept in {review.decisions_path}")
        raise
    return EXIT_OK
