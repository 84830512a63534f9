"""The argument parser of every command, with its help texts (what each option does, the exit codes).

The parser converts the options' text (``--k abc`` is its one-line usage error, exit 2); the values are checked when
the job's config is made (a NaN threshold, a zero line limit, a negative batch size: exit 2, one line), before
anything is read or encoded with them, and Python callers get the same refusal.
"""

from __future__ import annotations

import argparse
import functools
import sys
from collections.abc import Callable

from bitext_hf.cli.app import add_app_command
from bitext_hf.cli.arguments import add_config_options
from bitext_hf.cli.commands import cmd_align, cmd_encode, cmd_mine, cmd_score
from bitext_hf.cli.data import EPILOG_GETTEXT, cmd_data_gettext
from bitext_hf.cli.evaluate import EVAL_KEYS, cmd_eval
from bitext_hf.cli.push import EPILOG_PUSH, cmd_push
from bitext_hf.errors import EXIT_USAGE
from bitext_hf.io import (
    DEFAULT_MAX_INPUT_BYTES,
    MAX_INPUT_BYTES_ENV,
    input_byte_limit,
    max_input_bytes,
    parse_byte_count,
)
from bitext_hf.jobs.align import AlignConfig
from bitext_hf.jobs.encode import EncodeConfig
from bitext_hf.jobs.evaluate import EvalConfig
from bitext_hf.jobs.gettext import GettextConfig
from bitext_hf.jobs.mine import MiningConfig
from bitext_hf.jobs.option_fields import positive_int, show_count
from bitext_hf.jobs.push import PushConfig
from bitext_hf.jobs.score import ScoreConfig
from bitext_hf.threads import usable_cpus

__all__ = ["EPILOG_EXIT", "OneLineErrorParser", "build_parser", "shared_options"]

EPILOG_EXIT = """exit codes:
  0  success
  1  any other error, including a failed output write (a full disk); nothing partial is left behind
  2  wrong usage: bad options, an output path that cannot be written or that names an input
  3  bad input data: the message names the file and line
  4  an encoder or model that cannot be loaded (not cached while offline, a hub that cannot be reached, missing
     or corrupt files); for push, the Hub refused or could not be reached (no token, no permission, no network)
  130  interrupted (Ctrl-C); no output file is left
Errors are one line on stderr; --debug or BITEXT_HF_DEBUG=1 shows the traceback instead."""

_VERBOSE_HELP = (
    "also show the logs and progress bars of the libraries underneath (faiss, transformers, datasets, "
    "sentence-transformers), hidden by default"
)

_EPILOG_MINE = """examples:
  bitext-hf mine --demo
  bitext-hf mine --src corpus.en --tgt corpus.de --out pairs.tsv
  bitext-hf mine --src en.npy --tgt de.npy --src-text corpus.en --tgt-text corpus.de --out pairs.jsonl
  bitext-hf mine --src corpus.wo --tgt corpus.en --src-model ./laser3-wol --tgt-model ./teacher --out pairs.csv
  bitext-hf mine --src en.txt --tgt de.txt --src-docs en.docs --tgt-docs de.docs --out pairs.parquet
  zcat big.de.gz | bitext-hf mine --src corpus.en --tgt - --out - > pairs.tsv

Margins (Artetxe & Schwenk 2019): ratio = cos / mean of the two k-NN averages; distance = cos - that mean;
absolute = cos. Modes: forward / backward (best candidate per source / target), intersect (both), union (either),
max (forward and backward candidates by score, each sentence used once). --threshold applies in every mode.

Output columns: score src_index tgt_index src tgt (0-based line numbers), and doc_id with --src-docs; the format
follows the extension: .tsv, .csv (RFC 4180 quoting), .jsonl (one JSON object a line), .parquet, or --format.
A sentence holding a tab cannot be written as TSV: that is refused (exit 3, naming file:line) before encoding.
Duplicate lines are encoded and mined once, reported at their first line (inside each document with --src-docs).
"""


def _byte_count(text: str) -> int:
    try:
        return parse_byte_count(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


# argparse's message for this type names the function; say what is expected instead.
_byte_count.__name__ = "byte count"


def _bounded_inputs(command: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """``command`` run with its ``--max-input-bytes`` as the bound of every input it reads."""

    @functools.wraps(command)
    def run(args: argparse.Namespace) -> int:
        with input_byte_limit(args.max_input_bytes):
            max_input_bytes()  # a malformed $BITEXT_HF_MAX_INPUT_BYTES is a usage error before anything is read
            return command(args)

    return run


def _add_input_bound(parser: argparse.ArgumentParser) -> None:
    """``--max-input-bytes``, of every command that reads text: the command line's bound, applied around the job
    (:func:`_bounded_inputs`)."""
    parser.add_argument(
        "--max-input-bytes",
        type=_byte_count,
        default=None,
        metavar="BYTES",
        help=f"refuse an input holding more than this once decompressed (exit 3), e.g. 8G or 500M; default "
        f"${MAX_INPUT_BYTES_ENV} or {DEFAULT_MAX_INPUT_BYTES // 1024**3}G. Binary input (a NUL byte) is refused at "
        "its first chunk",
    )


def shared_options(*, defaults: bool) -> argparse.ArgumentParser:
    """The options every command takes, before its name or after it (``bitext-hf -v push`` or ``bitext-hf push
    -v``), as an argparse parent parser.

    The main parser's copy has the defaults (``defaults=True``); the sub-commands' copy has none (SUPPRESS):
    argparse copies every value of a sub-command's namespace over the main one, so a sub-command default would
    undo an option given before the sub-command's name.
    """
    parent = argparse.ArgumentParser(add_help=False)
    group = parent.add_argument_group("general")

    def default(value):
        return value if defaults else argparse.SUPPRESS

    group.add_argument(
        "-q", "--quiet", action="store_true", default=default(False), help="no progress bars or info logs"
    )
    group.add_argument("-v", "--verbose", action="store_true", default=default(False), help=_VERBOSE_HELP)
    group.add_argument(
        "--debug",
        action="store_true",
        default=default(False),
        help="show the traceback of an error (also BITEXT_HF_DEBUG=1)",
    )
    group.add_argument(
        "--threads",
        type=positive_int,
        default=default(None),
        metavar="N",
        help="CPU threads for encoding and search (default: OMP_NUM_THREADS if set, else the CPUs this process may "
        f"use, affinity and cgroup quota, here {usable_cpus()}, fewer when other work keeps some of them busy)",
    )
    return parent


_EPILOG_ENCODE = """examples:
  bitext-hf encode --input corpus.de --out corpus.de.npy
  zcat corpus.de.gz | bitext-hf encode --input - --out corpus.de.npy
  bitext-hf encode --input big.de.zst --out emb.de/ --shard-size 1000000 --dtype float16 --resume
  bitext-hf mine --src emb.de/ --tgt emb.en/ --src-text big.de.zst --tgt-text big.en.zst --out pairs.tsv

A folder --out gets shard-NNNNN.npy files (memory-mappable) and, written last, manifest.json (count,
dimension, dtype, encoder, SHA-256 of the text and of every shard); `mine` reads such folders a block at a
time. A killed run continues with --resume after its last complete shard, ending with the same bytes.
"""

_EPILOG_ALIGN = """examples:
  bitext-hf align --src book.de --tgt book.fr --out book.align
  bitext-hf align --src book.de --tgt book.fr --out book.parquet --max-align 4
  bitext-hf align --src de/ --tgt fr/ --out aligned/ --format jsonl   # documents paired by file name
  bitext-hf align --src-docs de.list --tgt-docs fr.list --out aligned/ # lists of documents, paired by line

Documents are translations of each other, one sentence a line, in order. Beads of 1-1, 1-0, 0-1 and up to
--max-align sentences on both sides together (2-1, 1-2, 2-2...) are found in Bertalign's two steps (Liu & Zhu
2022): 1-1 anchors from each sentence's top-k targets in a band around the diagonal, then every bead type within
--window sentences of the anchors, scored by the cosine of the overlap embeddings (consecutive sentences joined,
each distinct text encoded once) times a length prior (--no-length-prior: the cosine alone); --margin also
subtracts the neighbours' mean cosine, as Bertalign does (off by default). Time and memory grow linearly with the
document.

A bead's score: cosine x log2(1 + shorter / longer), the target side's length first scaled by the documents'
length ratio (--no-length-prior: the cosine alone). At most 1 without --margin: identical documents score 1.0, but
identical sentences in documents of unlike lengths score less, since the prior expects the documents' ratio. It
ranks beads within a run; it is not a probability of a correct bead. 1-0 and 0-1 beads are written with score 0
(in the search they cost --skip).

Output: vecalign format (default; one bead a line, `[0, 1]:[2]:0.734215`, 0-based, every sentence of both sides in
order: the format vecalign's and Bertalign's scorers read), or by extension / --format tsv, jsonl, parquet:
columns score src_lines tgt_lines src tgt (the joined sentences). Written atomically, with <out>.meta.json (the
settings); many documents (folders or lists) write one file per document into the --out folder, named after the
source document, and alignment.meta.json (the settings and the documents written). The --out folder is made if
it is missing (its parent must exist); it is never an input folder nor inside one, nor a folder of listed
documents, and its other files stay as they are. A folder's documents are its own files: files in its subfolders are left out, with a warning (list them
with --src-docs/--tgt-docs). Every output path is checked before anything is read (no link, FIFO, device or
folder at an output's name); the files are written to temporary files and renamed together at the end, the
sidecar last, so a failed or interrupted run leaves the earlier files as they were.

Limits: --skip between -1000 and 1000 (a linked bead scores between -2 and 2); --top-k at most 1000, and
capped at a document's target sentences; --max-align at most 64.
"""

_EPILOG_SCORE = """examples:
  bitext-hf score --pairs corpus.tsv --out scored.tsv
  bitext-hf score --src corpus.en --tgt corpus.de --threshold 1.05 --out kept.jsonl

Neighbourhoods for the margin come from the whole corpus on both sides. Output columns as in `mine`,
one row per input pair, in input order.
"""

_EPILOG_EVAL = """examples:
  bitext-hf eval --src test.en --tgt test.de --out results.json
  bitext-hf eval --mteb tatoeba.jsonl --subset deu-eng
  bitext-hf eval --mteb flores.parquet --columns sentence_eng_Latn,sentence_deu_Latn
  bitext-hf eval --bucc de-en.test.de de-en.test.en de-en.test.gold \
--bucc-train de-en.train.de de-en.train.en de-en.train.gold

"""


def _add_command(
    commands, shared: argparse.ArgumentParser, name: str, config: type, handler, *, help: str, epilog: str
) -> argparse.ArgumentParser:
    """The sub-command ``name``: the general options (``shared``), one option per field of its job's ``config`` that
    declares one, and its ``handler``."""
    parser = commands.add_parser(
        name, parents=[shared], help=help, formatter_class=argparse.RawDescriptionHelpFormatter, epilog=epilog
    )
    add_config_options(parser, config)
    parser.set_defaults(func=handler)
    return parser


def _reading_text(parser: argparse.ArgumentParser) -> None:
    """A command that reads text: ``--max-input-bytes``, the bound of every input it reads."""
    _add_input_bound(parser)
    parser.set_defaults(func=_bounded_inputs(parser.get_default("func")))


class OneLineErrorParser(argparse.ArgumentParser):
    """argparse prints the whole usage block before a usage error; the house rule is one line per error."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")


def build_parser() -> argparse.ArgumentParser:
    from bitext_hf import __version__

    # Sub-command parsers are made with the parent's class, so they inherit the one-line errors.
    parser = OneLineErrorParser(
        prog="bitext-hf",
        parents=[shared_options(defaults=True)],
        description="Multilingual sentence alignment and bitext mining with margin scoring, offline by default.",
        epilog="Run `bitext-hf <command> --help` for examples.\n\n" + EPILOG_EXIT,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"bitext-hf {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="{encode,mine,align,score,eval,push,data,app}")
    shared = shared_options(defaults=False)
    for name, config, handler, help, epilog in (
        (
            "encode",
            EncodeConfig,
            cmd_encode,
            "embed a text file (one sentence a line) into a .npy file",
            _EPILOG_ENCODE,
        ),
        ("mine", MiningConfig, cmd_mine, "mine translation pairs from two monolingual files", _EPILOG_MINE),
        (
            "align",
            AlignConfig,
            cmd_align,
            "align the sentences of two documents that are translations of each other",
            _EPILOG_ALIGN,
        ),
        (
            "score",
            ScoreConfig,
            cmd_score,
            "margin-score the pairs of an existing parallel corpus (filtering)",
            _EPILOG_SCORE,
        ),
        (
            "eval",
            EvalConfig,
            cmd_eval,
            "xsim, retrieval accuracy, MTEB bitext-mining metrics or BUCC F1 of an encoder",
            _EPILOG_EVAL + EVAL_KEYS,
        ),
    ):
        command = _add_command(commands, shared, name, config, handler, help=help, epilog=epilog + "\n" + EPILOG_EXIT)
        if name == "mine":
            command.add_argument(
                "--demo",
                action="store_true",
                help="mine the bundled English-German demo and score it against its gold pairs",
            )
            command.add_argument(
                "--show", type=show_count, default=10, help="pairs to print (default 10, -1 for all, 0 none)"
            )
        _reading_text(command)
    _add_command(
        commands,
        shared,
        "push",
        PushConfig,
        cmd_push,
        help="upload a saved model, or mined pairs as a dataset with its card, to the Hugging Face Hub",
        epilog=EPILOG_PUSH,
    )
    data = commands.add_parser(
        "data",
        parents=[shared],
        help="build parallel data without writing code: `data gettext` (the installed translation catalogs)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Run `bitext-hf data gettext --help` for examples.",
    )
    data.set_defaults(func=lambda args: _print_help_to_stderr(data))
    _add_command(
        data.add_subparsers(dest="data_command", metavar="{gettext}"),
        shared,
        "gettext",
        GettextConfig,
        cmd_data_gettext,
        help="English-xx pairs from the gettext catalogs installed on this machine (--list: languages and counts)",
        epilog=EPILOG_GETTEXT + "\n" + EPILOG_EXIT,
    )
    _reading_text(add_app_command(commands, shared))
    return parser


def _print_help_to_stderr(parser: argparse.ArgumentParser) -> int:
    """A command that needs a sub-command (``data``) given none: its help, on stderr, and a usage error."""
    parser.print_help(sys.stderr)
    return EXIT_USAGE
