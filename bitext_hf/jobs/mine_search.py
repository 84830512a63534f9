"""Which rows a mining run searches, and the search: the options of the index checked against the sides before any
encoding, the rows of each side after the filters and the de-duplication (each distinct sentence encoded and mined
once, reported at its first line), and the search itself, in memory, block by block over folders of shards, or on a
Ray cluster (one session for the encoding and the search). :func:`bitext_hf.jobs.mine.run_mining` calls these in that
order.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
from typing import TYPE_CHECKING

import numpy as np

from bitext_hf.data.embeddings import check_embeddings
from bitext_hf.errors import UsageError
from bitext_hf.jobs.sides import Side, display

if TYPE_CHECKING:
    from bitext_hf.encoding.embedder import Embedder
    from bitext_hf.jobs.mine import MiningConfig
    from bitext_hf.mining.index import RecallReport
    from bitext_hf.mining.retrieval import MinedPairs

__all__ = ["check_filter_options", "check_index_options", "distributed_session", "rows_to_mine", "search_and_retrieve"]

logger = logging.getLogger("bitext_hf")


def check_index_options(config: MiningConfig, src: Side, tgt: Side, per_document: bool) -> None:
    """index / nprobe / check_recall, checked before any encoding: a factory string against the dimension of a .npy
    side (else only its syntax, on a dimension that most factory strings accept; the encoder's dimension is checked
    after encoding) and against the corpus sizes."""
    if config.index == "exact" and config.check_recall:
        raise UsageError("--check-recall compares an approximate --index with exact search; --index is exact")
    if config.index == "exact" and config.nprobe is None:
        return
    if per_document and config.index not in ("exact", "auto"):
        raise UsageError(
            f"--index {config.index!r} with --src-docs: document-level mining takes --index exact or auto (one index "
            "per document would be trained on that document alone)"
        )
    known = next((side.embeddings.shape[1] for side in (src, tgt) if side.embeddings is not None), None)
    config.index_spec(src.n_rows, tgt.n_rows, known)  # None: the syntax only, until encoded


def distributed_session(config: MiningConfig):
    """One Ray session for the encoding of both sides and the search under ``distributed="ray"`` (each would start
    its own, and load the encoder in fresh workers, otherwise); nothing without it."""
    if not config.distributed:
        return contextlib.nullcontext()
    from bitext_hf.encoding.ray import ray_session

    return ray_session(config.ray_address, config.workers)


def rows_to_mine(
    config: MiningConfig, embedder: Embedder, side: Side, what: str, spec: str | None, per_document, kept
):
    """(embeddings of the rows to mine, the line of each row, the de-duplication key of each row or None).
    ``kept``: the lines the single-side filters kept (None: every line).

    Each side is validated once: a .npy side when it was read, encoded sentences here (``check_embeddings``), a
    folder of shards by its manifest and checksums when it was opened."""
    from bitext_hf.data import deduplicate

    def encoded(texts: list[str]) -> np.ndarray:
        return check_embeddings(embedder.embed(texts, what, spec), f"{what} embeddings")

    lines = np.arange(side.n_rows)
    if kept is not None:
        embeddings = None if side.embeddings is None else side.embeddings[kept]
        side = dataclasses.replace(side, texts=[side.texts[line] for line in kept.tolist()], embeddings=embeddings)
        lines = kept
    if side.texts is None or config.keep_duplicates:
        emb = side.embeddings if side.embeddings is not None else encoded(side.texts)
        return emb, lines, None
    unique, inverse = deduplicate(side.texts)
    inverse = np.asarray(inverse, dtype=np.int64)
    if per_document:
        # No global de-duplication: a sentence repeated in two documents must be seen by both. Each distinct
        # sentence is still encoded once; mine_documents mines it once per document (the texts are the keys).
        emb = side.embeddings if side.embeddings is not None else encoded(unique)[inverse]
        return emb, lines, side.texts
    if len(unique) < len(side.texts):
        logger.warning(
            "%s: %d duplicate line(s); each distinct sentence is mined once and reported at its first line "
            "(--keep-duplicates mines every line)",
            display(side.text_path),
            len(side.texts) - len(unique),
        )
    # Unique sentences are in first-occurrence order, so the first line of each is where its id first appears.
    first_line = np.unique(inverse, return_index=True)[1]
    emb = side.embeddings[first_line] if side.embeddings is not None else encoded(unique)
    return emb, lines[first_line], None


def check_filter_options(config: MiningConfig, src: Side, tgt: Side) -> None:
    """Filters need the sentences of each side, in memory."""
    filters = config.filters
    if filters.active:
        for name, side in (("src", src), ("tgt", tgt)):
            if side.texts is None:
                raise UsageError(f"the filters read the sentences: give --{name}-text with the embeddings {side.path}")
            if filters.single_side and side.embeddings is not None and not isinstance(side.embeddings, np.ndarray):
                raise UsageError(
                    f"--{name} {side.path} is a folder of shards: filter the text before `bitext-hf encode` (the "
                    "single-side filters run before encoding)"
                )


def search_and_retrieve(
    config: MiningConfig, src_emb, tgt_emb, threshold: float | None
) -> tuple[MinedPairs, RecallReport | None]:
    """Search and retrieve in memory, or block by block when a side is a folder of shards (same pairs and scores).
    Returns the pairs and, with check_recall, the recall@k of the run's own forward neighbours (no second index)."""
    from bitext_hf.encoding.shards import ShardedEmbeddings
    from bitext_hf.mining.index import recall_at_k, search_neighbours_unchecked
    from bitext_hf.mining.retrieval import retrieve
    from bitext_hf.mining.sharded import mine_shards

    settings = dict(k=config.k, margin=config.margin, mode=config.mode, threshold=threshold)
    show_progress = not config.quiet and src_emb.shape[0] > 50_000
    if config.distributed:
        from bitext_hf.mining.distributed import mine_ray
        from bitext_hf.mining.distributed_index import mine_ray_index

        on_ray = dict(address=config.ray_address, workers=config.workers, **settings)
        if config.index == "exact":
            return mine_ray(src_emb, tgt_emb, **on_ray), None
        return mine_ray_index(src_emb, tgt_emb, index=config.index, nprobe=config.nprobe, **on_ray), None
    sharded = [isinstance(side, ShardedEmbeddings) for side in (src_emb, tgt_emb)]
    if any(sharded):
        if config.index == "exact":
            return mine_shards(src_emb, tgt_emb, show_progress=show_progress, **settings), None
        logger.warning("--index %s reads the shards into memory (only the exact search streams them)", config.index)
        src_emb, tgt_emb = (
            check_embeddings(np.asarray(side), name) if was_sharded else side
            for side, name, was_sharded in zip((src_emb, tgt_emb), ("source embeddings", "target embeddings"), sharded)
        )
    # Both sides are validated (see rows_to_mine) and their dimensions compared: the search skips its own check.
    knn = search_neighbours_unchecked(
        src_emb, tgt_emb, config.k, index=config.index, nprobe=config.nprobe, show_progress=show_progress
    )
    recall = None
    if config.check_recall:
        spec = config.index_spec(src_emb.shape[0], tgt_emb.shape[0], src_emb.shape[1])
        recall = recall_at_k(src_emb, tgt_emb, knn, queries=config.check_recall, index=str(spec))
    return retrieve(knn, margin=config.margin, mode=config.mode, threshold=threshold), recall
