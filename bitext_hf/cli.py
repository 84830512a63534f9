"""The ``bitext-hf`` command line: encode, mine, score and eval.

Exit codes: 0 success; 2 wrong usage; 3 bad input data (the message names the file and line); 4 an encoder that
cannot be loaded; 1 anything else. Results go to stdout, progress and warnings to stderr, files are written
atomically (complete or not at all).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np

__all__ = ["main"]

logger = logging.getLogger("bitext_hf")

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_DATA, EXIT_ENCODER = 0, 1, 2, 3, 4
DEMO_DIR = Path(__file__).parent / "demo"


class CliError(Exception):
    def __init__(self, message: str, code: int = EXIT_DATA) -> None:
        super().__init__(message)
        self.code = code


# ----------------------------------------------------------------------------------------------------- inputs


def _encoder(args):
    from bitext_hf.encoders import load_encoder

    if getattr(args, "_encoder", None) is None:
        args._encoder = load_encoder(args.model, pooling=args.pooling)
    return args._encoder


def _embed(args, texts: list[str], what: str) -> np.ndarray:
    logger.info("encoding %d %s sentences", len(texts), what)
    return _encoder(args).encode(texts, batch_size=args.batch_size, show_progress=not args.quiet)


def _load_side(args, path: str) -> tuple[list[str] | None, np.ndarray | None]:
    """Texts of a side (plain text file) or precomputed embeddings (.npy)."""
    from bitext_hf.data import read_lines

    if path.endswith(".npy"):
        try:
            embeddings = np.load(path, mmap_mode="r", allow_pickle=False)
        except (OSError, ValueError) as error:
            raise CliError(f"{path}: not a readable .npy embedding file ({error})") from None
        from bitext_hf.mining import check_embeddings

        try:
            return None, check_embeddings(embeddings, path)
        except ValueError as error:
            raise CliError(str(error)) from None
    return read_lines(path, max_chars=args.max_line_chars), None


def _dedup_note(path: str, texts: list[str], unique: list[str]) -> None:
    if len(unique) < len(texts):
        logger.warning(
            "%s: %d duplicate line(s); each distinct sentence is mined once and reported at its first line "
            "(--keep-duplicates mines every line)",
            path, len(texts) - len(unique),
        )  # fmt: skip


def _side_for_mining(args, path: str, what: str):
    """(texts by line, embeddings of mined rows, line number of each mined row)."""
    from bitext_hf.data import deduplicate

    texts, embeddings = _load_side(args, path)
    if embeddings is not None:
        return texts, embeddings, np.arange(embeddings.shape[0])
    if args.keep_duplicates:
        return texts, _embed(args, texts, what), np.arange(len(texts))
    unique, inverse = deduplicate(texts)
    _dedup_note(path, texts, unique)
    # Unique sentences are in first-occurrence order, so the first line of each is where its id first appears.
    first_line = np.unique(np.asarray(inverse), return_index=True)[1]
    return texts, _embed(args, unique, what), first_line


def _read_gold(path: Path) -> set[tuple[int, int]]:
    from bitext_hf.data import read_lines

    gold = set()
    for number, line in enumerate(read_lines(path, allow_empty_lines=True), start=1):
        cells = line.split("\t")
        if not line.strip() or (number == 1 and not cells[0].strip().isdigit()):
            continue  # blank line or header
        if len(cells) < 2 or not (cells[0].strip().isdigit() and cells[1].strip().isdigit()):
            raise CliError(f"{path}:{number}: expected `src_line<TAB>tgt_line` (0-based line numbers)")
        gold.add((int(cells[0]), int(cells[1])))
    return gold


# ----------------------------------------------------------------------------------------------------- commands


def cmd_encode(args) -> int:
    from bitext_hf.data import read_lines
    from bitext_hf.io import atomic_output

    texts = read_lines(args.input, max_chars=args.max_line_chars)
    embeddings = _embed(args, texts, "input")
    with atomic_output(args.out, "wb") as handle:
        np.save(handle, embeddings.astype(np.float32))
    print(f"wrote {embeddings.shape[0]} x {embeddings.shape[1]} float32 embeddings to {args.out}")
    return EXIT_OK


def cmd_mine(args) -> int:
    from bitext_hf.mining import MinedPairs, mine, mine_documents, write_pairs

    if args.demo:
        if args.src or args.tgt:
            raise CliError("--demo mines the bundled corpus; do not combine it with --src/--tgt", EXIT_USAGE)
        args.src, args.tgt = str(DEMO_DIR / "en.txt"), str(DEMO_DIR / "de.txt")
        args.gold = args.gold or str(DEMO_DIR / "gold.tsv")
        print(f"Demo: {DEMO_DIR / 'README.md'} (Django UI messages, English-German, BSD-3-Clause)")
    if not args.src or not args.tgt:
        raise CliError("give --src and --tgt (text or .npy files), or --demo", EXIT_USAGE)
    src_texts, src_emb, src_lines = _side_for_mining(args, args.src, "source")
    tgt_texts, tgt_emb, tgt_lines = _side_for_mining(args, args.tgt, "target")
    if src_emb.shape[1] != tgt_emb.shape[1]:
        raise CliError(f"{args.src} has dimension {src_emb.shape[1]} but {args.tgt} has {tgt_emb.shape[1]}")
    for path, other in ((args.src, tgt_emb.shape[0]), (args.tgt, src_emb.shape[0])):
        if args.k > other:
            logger.warning(
                "k=%d is larger than the other side (%d rows): using k=%d for %s", args.k, other, other, path
            )

    settings = dict(k=args.k, margin=args.margin, mode=args.mode, threshold=args.threshold)
    if args.src_docs or args.tgt_docs:
        if not (args.src_docs and args.tgt_docs):
            raise CliError("document-level mining needs both --src-docs and --tgt-docs", EXIT_USAGE)
        from bitext_hf.data import read_lines

        doc_ids = []
        for docs_path, texts, emb, side in (
            (args.src_docs, src_texts, src_emb, args.src),
            (args.tgt_docs, tgt_texts, tgt_emb, args.tgt),
        ):
            docs = np.asarray(read_lines(docs_path))
            n_lines = len(texts) if texts is not None else emb.shape[0]
            if len(docs) != n_lines:
                raise CliError(
                    f"{docs_path} has {len(docs)} lines but {side} has {n_lines}: give one document id per line"
                )
            doc_ids.append(docs)
        src_docs, tgt_docs = doc_ids
        pairs = mine_documents(src_emb, tgt_emb, src_docs[src_lines], tgt_docs[tgt_lines], **settings)
    else:
        pairs = mine(src_emb, tgt_emb, show_progress=not args.quiet and src_emb.shape[0] > 50_000, **settings)
    pairs = MinedPairs(src_lines[pairs.src_indices], tgt_lines[pairs.tgt_indices], pairs.scores, pairs.cosines)

    if args.out:
        write_pairs(pairs, args.out, src_texts=src_texts, tgt_texts=tgt_texts)
        print(f"wrote {len(pairs)} pairs to {args.out}")
    shown = len(pairs) if args.show < 0 else min(args.show, len(pairs))
    if shown:
        print(f"{'score':>7}  {'src':>6}  {'tgt':>6}  sentences")
        for src, tgt, score in pairs.select(slice(shown)):
            src_text = src_texts[src] if src_texts else ""
            tgt_text = tgt_texts[tgt] if tgt_texts else ""
            print(f"{score:7.4f}  {src:6d}  {tgt:6d}  {src_text}  |||  {tgt_text}")
        if shown < len(pairs):
            print(f"... {len(pairs) - shown} more (--show -1 prints all, --out FILE writes them)")
    print(
        f"mined {len(pairs)} pairs from {src_emb.shape[0]} source x {tgt_emb.shape[0]} target sentences "
        f"(k={args.k}, margin={args.margin}, mode={args.mode}, threshold={args.threshold})"
    )
    if args.gold:
        gold = _read_gold(Path(args.gold))
        found = pairs.as_set()
        true_positives = len(found & gold)
        precision = true_positives / len(found) if found else 0.0
        recall = true_positives / len(gold) if gold else 0.0
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        print(f"against {len(gold)} gold pairs: precision {precision:.3f}  recall {recall:.3f}  F1 {f1:.3f}")
    return EXIT_OK


def _pair_texts(args) -> tuple[list[str], list[str]]:
    from bitext_hf.data import read_moses, read_tsv_pairs

    if args.pairs:
        if args.src or args.tgt:
            raise CliError("give either --pairs FILE.tsv or --src/--tgt, not both", EXIT_USAGE)
        return read_tsv_pairs(args.pairs, max_chars=args.max_line_chars)
    if not (args.src and args.tgt):
        raise CliError("give --pairs FILE.tsv, or --src and --tgt parallel files", EXIT_USAGE)
    return read_moses(args.src, args.tgt, max_chars=args.max_line_chars)


def cmd_score(args) -> int:
    from bitext_hf.mining import MinedPairs, score_pairs, write_pairs

    sources, targets = _pair_texts(args)
    src_emb, tgt_emb = _embed(args, sources, "source"), _embed(args, targets, "target")
    scores = score_pairs(src_emb, tgt_emb, k=args.k, margin=args.margin)
    rows = np.arange(len(sources))
    pairs = MinedPairs(rows, rows, scores, np.einsum("ij,ij->i", src_emb, tgt_emb))
    if args.threshold is not None:
        pairs = pairs.select(pairs.scores >= args.threshold)
    write_pairs(pairs, args.out, src_texts=sources, tgt_texts=targets)
    print(
        f"scored {len(sources)} pairs (k={args.k}, margin={args.margin}); wrote {len(pairs)} to {args.out}"
        + (f" (threshold {args.threshold})" if args.threshold is not None else "")
    )
    print(
        "score quantiles: "
        + "  ".join(
            f"{q:.0%} {v:.4f}"
            for q, v in zip((0.05, 0.25, 0.5, 0.75, 0.95), np.quantile(scores, [0.05, 0.25, 0.5, 0.75, 0.95]))
        )
    )
    return EXIT_OK


def cmd_eval(args) -> int:
    from bitext_hf.data import read_bucc, read_mteb
    from bitext_hf.metrics import functional as F
    from bitext_hf.mining import bidirectional_knn, mine
    from bitext_hf.io import atomic_output

    results: dict[str, object] = {"model": args.model or "use-multilingual-v3", "k": args.k, "margin": args.margin}
    if args.bucc:
        task = read_bucc(*args.bucc)
        train = read_bucc(*args.bucc_train) if args.bucc_train else None

        def candidates(t):
            pairs = mine(
                _embed(args, t.sources, "source"),
                _embed(args, t.targets, "target"),
                k=args.k,
                margin=args.margin,
                mode=args.mode,
            )
            labels, n_gold = F.bucc_labels(zip(pairs.src_indices.tolist(), pairs.tgt_indices.tolist()), t.gold)
            return pairs.scores, labels, n_gold

        test_scores, test_labels, test_gold = candidates(task)
        kwargs = {}
        if train is not None:
            kwargs = dict(zip(("train_scores", "train_labels", "n_gold_train"), candidates(train)))
        results["bucc_f1"] = F.bucc_f1(test_scores, test_labels, n_gold_test=test_gold, **kwargs)
        results["bucc_f1"]["threshold_from"] = "train" if train is not None else "test (oracle)"
    else:
        if args.mteb:
            task = read_mteb(args.mteb, split=args.split, subset=args.subset)
            sources, targets, gold, aligned = task.sources, task.targets, task.gold, task.is_aligned
        else:
            sources, targets = _pair_texts(args)
            gold, aligned = [(i, i) for i in range(len(sources))], True
        gold_tgt = [j for _, j in gold]
        # Only the sources of gold pairs are evaluated: the others are never encoded. When the data is aligned,
        # they are every source in order.
        src_sel = _embed(args, [sources[i] for i, _ in gold], "source")
        tgt_emb = _embed(args, targets, "target")
        metrics = set(args.metrics)
        if "xsim" in metrics:
            # One kNN for both the index-based and the text-based error counts.
            knn = bidirectional_knn(src_sel, tgt_emb, args.k)
            results["xsim"] = F.xsim_from_knn(knn, margin=args.margin, gold=gold_tgt)
            results["xsim_text"] = F.xsim_from_knn(knn, margin=args.margin, gold=gold_tgt, target_texts=targets)
        if "accuracy" in metrics:
            if aligned:
                results["accuracy"] = F.bitext_accuracy(src_sel, tgt_emb)
            else:
                logger.warning("accuracy needs row-aligned pairs; skipped for this data")
        results["n_pairs"] = len(gold)
    text = json.dumps(results, indent=2, ensure_ascii=False)
    print(text)
    if args.out:
        with atomic_output(args.out) as handle:
            handle.write(text + "\n")
    return EXIT_OK


# ----------------------------------------------------------------------------------------------------- parser

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

    from bitext_hf.data import DataValidationError
    from bitext_hf.encoders import EncoderLoadError

    try:
        return args.func(args)
    except CliError as error:
        print(f"bitext-hf {args.command}: error: {error}", file=sys.stderr)
        return error.code
    except DataValidationError as error:
        print(f"bitext-hf {args.command}: error: {error}", file=sys.stderr)
        return EXIT_DATA
    except EncoderLoadError as error:
        print(f"bitext-hf {args.command}: error: {error}", file=sys.stderr)
        return EXIT_ENCODER
    except (ValueError, FileNotFoundError) as error:
        print(f"bitext-hf {args.command}: error: {error}", file=sys.stderr)
        return EXIT_DATA
    except KeyboardInterrupt:
        print("interrupted; no output file was written", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
