"""Teacher embeddings computed once, cached on disk and served memory-mapped.

The entries are the encoding cache's (:mod:`bitext_hf.encoding.cache`): written atomically, served only from
a regular file whose checksum, shape and values (finite, no all-zero row) hold, and encoded again otherwise. The key
covers the teacher id (a local teacher folder by its files too), the curriculum prefix ratio and the exact texts, so
a cache never serves embeddings of other texts or of another teacher; with the curriculum each prefix stage has its
own entry. Files of the earlier ``teacher-<hash>.npy`` layout have other names and are never read.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bitext_hf.encoding.cache import EmbeddingCache, entry_key
from bitext_hf.families.laser3.errors import DistillationDataError

__all__ = ["TeacherEmbeddingCache", "cache_key"]

logger = logging.getLogger(__name__)


def cache_key(teacher_id: str, texts: Sequence[str], prefix_ratio: float = 1.0) -> str:
    """The hex key of (teacher id, prefix ratio, texts): the encoding cache's key, the ratio as its context."""
    return entry_key(texts, teacher_id, context=f"prefix ratio {prefix_ratio:.6f}")


class TeacherEmbeddingCache:
    """Compute a frozen teacher's embeddings once per (texts, prefix ratio) and serve them memory-mapped.

    Args:
        cache_dir: folder for the ``.npy`` files (created if missing).
        teacher: any object with ``encode(sentences, batch_size=..., show_progress=...) -> np.ndarray`` (the
            `bitext_hf.encoders.Encoder` protocol).
        teacher_id: names the teacher in the cache key (a model id or path); two teachers must not share it.
        batch_size: encoding batch size.
    """

    def __init__(self, cache_dir: str | os.PathLike, teacher: Any, teacher_id: str, batch_size: int = 64) -> None:
        if not teacher_id:
            raise DistillationDataError("TeacherEmbeddingCache needs a non-empty teacher_id for its cache keys")
        self.cache_dir = Path(cache_dir)
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        self.teacher = teacher
        self.teacher_id = teacher_id
        self.batch_size = batch_size
        self._entries = EmbeddingCache(self.cache_dir)

    def path_for(self, texts: Sequence[str], prefix_ratio: float = 1.0) -> Path:
        return self._entries.path(cache_key(self.teacher_id, texts, prefix_ratio))

    def get(self, texts: Sequence[str], prefix_ratio: float = 1.0) -> np.ndarray:
        """Embeddings of ``texts`` (already cut to ``prefix_ratio``, which only keys the cache), shape (n, d).

        A read-only memory map of the cached entry; computed and written on the first request. Where the entry
        cannot be written (a read-only folder, a full disk: one warning) or would not be served (NaN, an all-zero
        row), the computed array itself.
        """
        if len(texts) == 0:
            raise DistillationDataError("cannot compute teacher embeddings of an empty list of texts")
        key = cache_key(self.teacher_id, texts, prefix_ratio)
        cached = self._entries.load(key, len(texts), memory_map=True)
        if cached is not None:
            return cached
        embeddings = np.asarray(self.teacher.encode(list(texts), batch_size=self.batch_size), dtype=np.float32)
        if embeddings.ndim != 2 or embeddings.shape[0] != len(texts):
            raise DistillationDataError(
                f"teacher {self.teacher_id!r} returned embeddings of shape {embeddings.shape} for {len(texts)} "
                "texts; expected (n_texts, dim)"
            )
        if not self._entries.store(key, embeddings):
            return embeddings
        logger.info(
            "Cached %d teacher embeddings (ratio %.2f) in %s", len(texts), prefix_ratio, self._entries.path(key)
        )
        # Served from the entry just written, so that the training keeps the page cache's copy, not a second one.
        stored = self._entries.load(key, len(texts), memory_map=True)
        return embeddings if stored is None else stored
