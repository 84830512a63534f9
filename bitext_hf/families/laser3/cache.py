"""Teacher embeddings computed once and cached on disk as memory-mapped ``.npy`` files.

The key is a hash of the teacher id, the curriculum prefix ratio and the exact texts, so a cache never serves
embeddings of other texts or of another teacher; with the curriculum each prefix stage has its own file.
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bitext_hf.families.laser3.errors import DistillationDataError
from bitext_hf.io import atomic_output, non_regular_kind

__all__ = ["TeacherEmbeddingCache", "cache_key"]

logger = logging.getLogger(__name__)


def cache_key(teacher_id: str, texts: Sequence[str], prefix_ratio: float = 1.0) -> str:
    """A stable hex digest of (teacher id, prefix ratio, texts); texts are length-prefixed so joins cannot collide."""
    digest = hashlib.sha256()
    digest.update(f"{teacher_id}\0{prefix_ratio:.6f}\0{len(texts)}\0".encode())
    for text in texts:
        encoded = text.encode("utf-8")
        digest.update(len(encoded).to_bytes(8, "little"))
        digest.update(encoded)
    return digest.hexdigest()[:32]


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

    def path_for(self, texts: Sequence[str], prefix_ratio: float = 1.0) -> Path:
        return self.cache_dir / f"teacher-{cache_key(self.teacher_id, texts, prefix_ratio)}.npy"

    def get(self, texts: Sequence[str], prefix_ratio: float = 1.0) -> np.ndarray:
        """Embeddings of ``texts`` (already cut to ``prefix_ratio``, which only keys the cache), shape (n, d).

        Read-only memory map of the cached file; computed and written atomically on the first request.
        """
        if len(texts) == 0:
            raise DistillationDataError("cannot compute teacher embeddings of an empty list of texts")
        path = self.path_for(texts, prefix_ratio)
        kind = non_regular_kind(path)
        if kind is not None:  # a FIFO would block the read, a link would be read through
            raise DistillationDataError(f"teacher cache {path} is {kind}; remove it to compute the embeddings again")
        if not path.exists():
            embeddings = np.asarray(self.teacher.encode(list(texts), batch_size=self.batch_size), dtype=np.float32)
            if embeddings.ndim != 2 or embeddings.shape[0] != len(texts):
                raise DistillationDataError(
                    f"teacher {self.teacher_id!r} returned embeddings of shape {embeddings.shape} for {len(texts)} "
                    "texts; expected (n_texts, dim)"
                )
            with atomic_output(path, "wb", follow_symlinks=False) as handle:
                np.save(handle, embeddings)
            logger.info("Cached %d teacher embeddings (ratio %.2f) in %s", len(texts), prefix_ratio, path)
        embeddings = np.load(path, mmap_mode="r")
        if embeddings.shape[0] != len(texts):
            raise DistillationDataError(
                f"teacher cache {path} holds {embeddings.shape[0]} rows for {len(texts)} texts"
            )
        return embeddings
