"""The encoding engine every job shares: text in, embeddings out, through the encoding cache, into memory or a folder
of shards, in one process or in Ray tasks. The job of ``bitext-hf encode`` is :mod:`bitext_hf.jobs.encode`.

- :mod:`~bitext_hf.encoding.embedder`: :class:`Embedder` (the encoder engine of every job: ``mine``, ``align``,
  ``encode``, ``score``, ``eval``).
- :mod:`~bitext_hf.encoding.cache`: the encoding cache, embeddings kept on disk by content and encoder.
- :mod:`~bitext_hf.encoding.shards`: the shard folder format, written (:func:`write_shards`, resumable) and read
  (:func:`open_shards`, memory-mapped), with its manifest (``shard_manifest.py``) and rows named for a task to read
  (``shard_rows.py``).
- :mod:`~bitext_hf.encoding.ray`: Ray sessions (also those of ``mine``'s Ray search) and the Ray encoding.
"""

from __future__ import annotations

from bitext_hf.encoding.cache import EmbeddingCache
from bitext_hf.encoding.embedder import Embedder
from bitext_hf.encoding.shards import (
    DEFAULT_SHARD_SIZE,
    Manifest,
    ShardedEmbeddings,
    is_shard_folder,
    open_shards,
    read_manifest,
    write_shards,
)

__all__ = [
    "DEFAULT_SHARD_SIZE",
    "Embedder",
    "EmbeddingCache",
    "Manifest",
    "ShardedEmbeddings",
    "is_shard_folder",
    "open_shards",
    "read_manifest",
    "write_shards",
]
