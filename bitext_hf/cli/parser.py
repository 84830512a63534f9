"""The argument parser of every command, with its help texts."""

from __future__ import annotations

import argparse

from bitext_hf.cli.commands import cmd_encode, cmd_mine, cmd_score
from bitext_hf.cli.evaluate import cmd_eval

_EPILOG_MINE = """examples:
  bitext-hf mine --demo
  bitext-hf mine --src corpus.en --tgt corpus.de --out pairs.tsv
  bitext-hf mine --src en.npy --tgt de.npy --mode intersect --threshold 1.06 --out pairs.parquet
  bitext-hf mine --src en.txt --tgt de.txt --src-docs en.docs --tgt-docs de.docs --out pairs.tsv

Margins (Artetxe & Schwenk 2019): ratio = cos / mean of the two k-NN averages; distance = cos - that mean;
absolute = cos. Modes: forward / backward (best candidate per source / target), intersect (both), union (either),
max (forward and backward candidates by score, each sentence used once). --threshold applies in every mode.
Output: TSV with header `score src_index tgt_index src tgt` (0-based line numbers), or Parquet (.parquet).
"""

_EPILOG_EXIT = "exit codes: 0 ok, 2 usage, 3 bad input data, 4 encoder cannot be loaded, 1 other errors"


def _add_common(parser: argparse.ArgumentParser, *, k: bool = True) -> None:
    group = parser.add_argument_group("encoder")
    group.add_argument(
        "--model",
        default=None,
        help="encoder: 'use-multilingual-v3' (default, embedded, no download), a sentence-transformers folder, "
        "or a Hugging Face model folder / cached hub id",
    )
    group.add_argument(
        "--pooling",
        choices=("mean", "max", "cls"),
        default=None,
        help="pooling for Hugging Face models (default mean); sentence-transformers models and USE pool their own way",
    )
    group.add_argument("--batch-size", type=int, default=128, help="sentences per encoder batch (default 128)")
    group.add_argument(
        "--max-line-chars", type=int, default=10_000, help="reject input lines longer than this (default 10000)"
    )
    if k:
        group = parser.add_argument_group("margin")
        group.add_argument(
            "--k", type=int, default=4, help="neighbours of the margin (default 4, capped at corpus size)"
        )
        group.add_argument(
            "--margin", choices=("ratio", "distance", "absolute"), default="ratio", help="default ratio"
        )
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress bars or info logs")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="bitext-hf",
        description="Multilingual sentence alignment and bitext mining with margin scoring, offline by default.",
        epilog="Run `bitext-hf <command> --help` for examples.\n" + _EPILOG_EXIT,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    from bitext_hf import __version__

    parser.add_argument("--version", action="version", version=f"bitext-hf {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="{encode,mine,score,eval}")
    fmt = argparse.RawDescriptionHelpFormatter

    p = commands.add_parser("encode", help="embed a text file (one sentence a line) into a .npy file", formatter_class=fmt,
                            epilog="example:\n  bitext-hf encode --input corpus.de --out corpus.de.npy\n\n" + _EPILOG_EXIT)  # fmt: skip
    p.add_argument("--input", required=True, help="UTF-8 text file, one sentence a line")
    p.add_argument("--out", required=True, help="output .npy (float32, L2-normalized rows)")
    _add_common(p, k=False)
    p.set_defaults(func=cmd_encode)

    p = commands.add_parser("mine", help="mine translation pairs from two monolingual files", formatter_class=fmt,
                            epilog=_EPILOG_MINE + "\n" + _EPILOG_EXIT)  # fmt: skip
    p.add_argument("--src", help="source sentences (.txt, one a line) or embeddings (.npy)")
    p.add_argument("--tgt", help="target sentences (.txt) or embeddings (.npy)")
    p.add_argument(
        "--demo", action="store_true", help="mine the bundled English-German demo and score it against its gold pairs"
    )
    p.add_argument("--out", help="write the pairs here (.tsv, or .parquet)")
    p.add_argument(
        "--mode", choices=("forward", "backward", "intersect", "union", "max"), default="max", help="default max"
    )
    p.add_argument("--threshold", type=float, default=None, help="keep pairs with score >= this (all modes)")
    p.add_argument("--src-docs", help="document id of each source line: mine inside aligned documents")
    p.add_argument("--tgt-docs", help="document id of each target line")
    p.add_argument("--gold", help="gold pairs (`src_line<TAB>tgt_line`, 0-based) to report precision and recall")
    p.add_argument("--keep-duplicates", action="store_true", help="mine duplicate lines separately (default: once)")
    p.add_argument("--show", type=int, default=10, help="pairs to print (default 10, -1 for all)")
    _add_common(p)
    p.set_defaults(func=cmd_mine)

    p = commands.add_parser("score", help="margin-score the pairs of an existing parallel corpus (filtering)", formatter_class=fmt,
                            epilog="examples:\n  bitext-hf score --pairs corpus.tsv --out scored.tsv\n"
                            "  bitext-hf score --src corpus.en --tgt corpus.de --threshold 1.05 --out kept.tsv\n\n"
                            "Neighbourhoods for the margin come from the whole corpus on both sides.\n" + _EPILOG_EXIT)  # fmt: skip
    p.add_argument("--pairs", help="TSV file: source<TAB>target per line")
    p.add_argument("--src", help="source side of Moses-style parallel files")
    p.add_argument("--tgt", help="target side of Moses-style parallel files")
    p.add_argument("--out", required=True, help="output .tsv / .parquet, in input order")
    p.add_argument("--threshold", type=float, default=None, help="keep only pairs with score >= this")
    _add_common(p)
    p.set_defaults(func=cmd_score)

    p = commands.add_parser("eval", help="xsim, retrieval accuracy or BUCC F1 of an encoder", formatter_class=fmt,
                            epilog="examples:\n  bitext-hf eval --src test.en --tgt test.de --out results.json\n"
                            "  bitext-hf eval --mteb tatoeba-deu.jsonl\n"
                            "  bitext-hf eval --bucc de-en.test.de de-en.test.en de-en.test.gold "
                            "--bucc-train de-en.train.de de-en.train.en de-en.train.gold\n\n" + _EPILOG_EXIT)  # fmt: skip
    p.add_argument("--pairs", help="TSV file of aligned pairs")
    p.add_argument("--src", help="aligned source file")
    p.add_argument("--tgt", help="aligned target file")
    p.add_argument("--mteb", help="MTEB bitext-mining data: .jsonl/.parquet/.csv file or a saved datasets folder")
    p.add_argument("--split", help="split of a saved DatasetDict (default test)")
    p.add_argument("--subset", help="rows of this `lang`/`subset` value only")
    p.add_argument("--bucc", nargs=3, metavar=("SRC", "TGT", "GOLD"), help="BUCC files (id<TAB>sentence, gold ids)")
    p.add_argument(
        "--bucc-train", nargs=3, metavar=("SRC", "TGT", "GOLD"), help="BUCC split to optimise the threshold on"
    )
    p.add_argument(
        "--mode",
        choices=("forward", "backward", "intersect", "union", "max"),
        default="max",
        help="BUCC candidates (default max)",
    )
    p.add_argument("--metrics", nargs="+", choices=("xsim", "accuracy"), default=["xsim", "accuracy"])
    p.add_argument("--out", help="write the results as JSON")
    _add_common(p)
    p.set_defaults(func=cmd_eval)
    return parser
