"""Reading a command's inputs: sentences or embeddings of each side, gold pairs, and the encoder that embeds them."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np

from bitext_hf.errors import DataValidationError, UsageError

logger = logging.getLogger("bitext_hf")


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
            raise DataValidationError(f"{path}: not a readable .npy embedding file ({error})") from None
        from bitext_hf.mining import check_embeddings

        try:
            return None, check_embeddings(embeddings, path)
        except ValueError as error:
            raise DataValidationError(str(error)) from None
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
            raise DataValidationError(f"{path}:{number}: expected `src_line<TAB>tgt_line` (0-based line numbers)")
        gold.add((int(cells[0]), int(cells[1])))
    return gold


def _pair_texts(args) -> tuple[list[str], list[str]]:
    from bitext_hf.data import read_moses, read_tsv_pairs

    if args.pairs:
        if args.src or args.tgt:
            raise UsageError("give either --pairs FILE.tsv or --src/--tgt, not both")
        return read_tsv_pairs(args.pairs, max_chars=args.max_line_chars)
    if not (args.src and args.tgt):
        raise UsageError("give --pairs FILE.tsv, or --src and --tgt parallel files")
    return read_moses(args.src, args.tgt, max_chars=args.max_line_chars)
