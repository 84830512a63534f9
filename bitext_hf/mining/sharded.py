"""Mining over embeddings in shard folders (``bitext-hf encode --out FOLDER/``): :func:`mine_shards` returns the same
pairs and scores as :func:`bitext_hf.mining.mine` on the concatenated arrays, holding only a block of each side and
the top-k lists in memory (the rows are read from the memory-mapped shards, normalized as
:func:`bitext_hf.data.embeddings.check_embeddings` normalizes the concatenation)."""

from __future__ import annotations

from bitext_hf.encoding.shards import ShardedEmbeddings
from bitext_hf.errors import DataValidationError

__all__ = ["mine_shards"]


def mine_shards(
    src_embeddings,
    tgt_embeddings,
    *,
    k: int = 4,
    margin: str = "ratio",
    mode: str | None = None,
    threshold: float | None = None,
    device: str | None = None,
    show_progress: bool = False,
    block_elements: int | None = None,
):
    """:func:`bitext_hf.mining.mine` where either side may be
    :class:`~bitext_hf.encoding.shards.ShardedEmbeddings`: the same pairs and scores as mining the concatenated
    arrays, with one block of each side in memory at a time (arguments as there)."""
    from bitext_hf.data.embeddings import check_embeddings
    from bitext_hf.mining.knn import DEFAULT_BLOCK_ELEMENTS, bidirectional_knn_unchecked
    from bitext_hf.mining.retrieval import DEFAULT_MODE, check_settings, retrieve

    mode = mode or DEFAULT_MODE
    check_settings(margin, mode, threshold)
    sides = []
    for embeddings, name in ((src_embeddings, "source embeddings"), (tgt_embeddings, "target embeddings")):
        sides.append(embeddings if isinstance(embeddings, ShardedEmbeddings) else check_embeddings(embeddings, name))
    src, tgt = sides
    if src.shape[1] != tgt.shape[1]:
        raise DataValidationError(
            f"dimension mismatch: source embeddings have dimension {src.shape[1]} but target embeddings "
            f"{tgt.shape[1]}; both sides must come from the same encoder"
        )
    knn = bidirectional_knn_unchecked(
        src,
        tgt,
        k,
        device=device,
        show_progress=show_progress,
        block_elements=block_elements or DEFAULT_BLOCK_ELEMENTS,
    )
    return retrieve(knn, margin=margin, mode=mode, threshold=threshold)
