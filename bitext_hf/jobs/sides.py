"""The inputs of the jobs that mine or score pairs, read before any expensive work: the sentences or embeddings of each side, document
ids and gold pairs (the sentences are encoded by :class:`bitext_hf.encoding.embedder.Embedder`).

Messages name the options as ``bitext-hf mine`` spells them (``--src-text`` is ``MiningConfig.src_text``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import numpy as np

from bitext_hf.errors import DataValidationError, UsageError

__all__ = [
    "Side",
    "display",
    "is_embeddings",
    "is_npy",
    "read_docs",
    "read_gold",
    "read_side",
]

logger = logging.getLogger("bitext_hf")


def display(path: str) -> str:
    """How messages name an input (``<stdin>`` for ``-``), as the readers do."""
    from bitext_hf.data.readers import display_name  # not at module level: --help must not import the data stack

    return display_name(path)


def is_npy(path: str) -> bool:
    """Whether ``path`` is read as a .npy embedding file (by its extension)."""
    return path.lower().endswith(".npy")


def is_embeddings(path: str) -> bool:
    """Embeddings rather than text: a .npy file, or a folder of shards (``bitext-hf encode --out FOLDER/``)."""
    from bitext_hf.encoding.shards import is_shard_folder

    return is_npy(path) or is_shard_folder(path)


# ----------------------------------------------------------------------------------------------------- sides


@dataclass
class Side:
    """One side of a mining run, as read from its files (nothing encoded yet).

    ``texts`` has one sentence per line (None for a .npy file given without its text file); ``text_path`` is the
    file they came from (for messages); ``embeddings`` are the rows of a .npy file (validated and L2-normalized),
    or the memory-mapped rows of a folder of shards (``ShardedEmbeddings``), else None.
    """

    path: str
    texts: list[str] | None
    text_path: str | None
    embeddings: Any

    @property
    def n_rows(self) -> int:
        return len(self.texts) if self.embeddings is None else self.embeddings.shape[0]

    @property
    def manifest_encoder(self) -> str | None:
        """The encoder a folder of shards records in its manifest (read once, when the side was opened); None for a
        text or .npy side."""
        manifest = getattr(self.embeddings, "manifest", None)
        return None if manifest is None else manifest.encoder


def read_side(path: str, text_path: str | None, what: str, *, max_line_chars: int = 10_000) -> Side:
    """Read a side: a text file, or a .npy file or a folder of shards with, optionally, the text file of its
    sentences (``--src-text``: one line per embedding row; checked against a manifest's text checksum). ``what``
    is ``src`` or ``tgt``; a line longer than ``max_line_chars`` is a data error."""
    from bitext_hf.data import read_embeddings, read_lines
    from bitext_hf.data.embeddings import check_embeddings
    from bitext_hf.encoding.shards import is_shard_folder, open_shards, text_sha256

    if not is_embeddings(path):
        if text_path is not None:
            raise UsageError(f"--{what}-text is for .npy inputs; {path} is read as text already")
        return Side(path, read_lines(path, max_chars=max_line_chars), path, None)
    sharded = is_shard_folder(path)
    embeddings = open_shards(path) if sharded else check_embeddings(read_embeddings(path), path)
    texts = None
    if text_path is not None:
        texts = read_lines(text_path, max_chars=max_line_chars)
        if len(texts) != embeddings.shape[0]:
            raise DataValidationError(
                f"{display(text_path)} has {len(texts)} lines but {path} has {embeddings.shape[0]} embedding rows: "
                "give the text file the embeddings were made from"
            )
        recorded = embeddings.manifest.text_sha256 if sharded else None
        if recorded is not None and text_sha256(texts) != recorded:
            raise DataValidationError(
                f"{display(text_path)} is not the text {path} was encoded from (its SHA-256 differs from the "
                "manifest's text_sha256)"
            )
    else:
        logger.warning(
            "%s: no sentences (give --%s-text FILE); the %s column of the output stays empty", path, what, what
        )
    return Side(path, texts, text_path, embeddings)


def read_docs(path: str, side: Side) -> np.ndarray:
    """The document id of each line of ``side`` (``--src-docs``): one line per row of the side."""
    from bitext_hf.data import read_lines

    docs = read_lines(path)
    if len(docs) != side.n_rows:
        raise DataValidationError(
            f"{display(path)} has {len(docs)} lines but {display(side.path)} has {side.n_rows}: "
            "give one document id per line"
        )
    return np.asarray(docs)


def read_gold(path: str, n_src: int, n_tgt: int) -> set[tuple[int, int]]:
    """Gold pairs ``src_line<TAB>tgt_line`` (0-based; an optional header line, blank lines skipped), checked against
    the number of lines of each side."""
    from bitext_hf.data import read_lines

    name = display(path)
    gold = set()
    for number, line in enumerate(read_lines(path, allow_empty_lines=True), start=1):
        cells = [cell.strip() for cell in line.split("\t")]
        if not line.strip() or (number == 1 and not cells[0].isdigit()):
            continue  # blank line or header
        if len(cells) != 2 or not (cells[0].isdigit() and cells[1].isdigit()):
            raise DataValidationError(f"{name}:{number}: expected `src_line<TAB>tgt_line` (0-based line numbers)")
        src, tgt = int(cells[0]), int(cells[1])
        if src >= n_src or tgt >= n_tgt:
            raise DataValidationError(
                f"{name}:{number}: pair ({src}, {tgt}) is out of range: the sides have {n_src} and {n_tgt} lines "
                "(line numbers are 0-based)"
            )
        gold.add((src, tgt))
    if not gold:
        raise DataValidationError(f"{name}: no gold pairs")
    return gold
