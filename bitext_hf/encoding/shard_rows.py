"""Rows of a shard folder named rather than held (:class:`RowRange`), and the conversion every reader of a shard
folder applies to the rows it reads (:func:`as_checked`); :class:`bitext_hf.encoding.shards.ShardedEmbeddings` makes
both."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from bitext_hf.errors import DataValidationError

__all__ = ["RowRange", "as_checked", "rows_across"]


def as_checked(block: np.ndarray, norms: np.ndarray, normalize: bool) -> np.ndarray:
    """Rows of a shard as float32, divided by their ``norms`` where the folder is ``normalize``d."""
    if not normalize:
        return np.ascontiguousarray(block, dtype=np.float32)
    # As check_embeddings: divided in float64, rounded once to float32.
    return (block.astype(np.float64) / norms[:, None]).astype(np.float32)


def rows_across(arrays: Sequence[np.ndarray], offset: int, count: int) -> np.ndarray:
    """Rows ``offset`` to ``offset + count`` of the concatenation of ``arrays`` (consecutive shards): a view where
    they lie in one shard, a copy of the pieces where they span several."""
    pieces = []
    for array in arrays:
        if count <= 0:
            break
        piece = array[offset : offset + count]
        if piece.shape[0]:
            pieces.append(piece)
        offset, count = max(0, offset - array.shape[0]), count - piece.shape[0]
    if len(pieces) <= 1:
        return pieces[0] if pieces else arrays[0][:0]
    return np.concatenate(pieces)


@dataclass(frozen=True, eq=False)
class RowRange:
    """Rows of a shard folder named, not held: ``read()`` returns them as ``ShardedEmbeddings`` would (the same
    float32 rows, normalized the same way), reading only the shards they lie in, memory-mapped.

    What a distributed task receives instead of the rows themselves (a few bytes a row for the norms, against
    ``4 x dimension`` through the object store): the folder must be at the same path where the task runs (one
    machine, or a shared file system) and unchanged since it was opened; each shard's size, shape and dtype are
    checked against the manifest again where it is read."""

    folder: str
    shards: tuple[tuple[str, int], ...]  # (file name, bytes) of each shard the rows lie in, in order
    offset: int  # the first row within the first of them
    count: int
    dimension: int
    dtype: str
    norms: np.ndarray
    normalize: bool

    def read(self) -> np.ndarray:
        from bitext_hf.data.embeddings import read_embeddings

        arrays = []
        for name, size in self.shards:
            path = os.path.join(self.folder, name)
            if not os.path.isfile(path) or os.path.getsize(path) != size:
                raise DataValidationError(
                    f"{path}: missing or of another size where this task runs; the folder must be reachable at "
                    "the same path from every worker (a shared file system) and unchanged while mining"
                )
            arrays.append(read_embeddings(path))
            if arrays[-1].shape[1] != self.dimension or arrays[-1].dtype != np.dtype(self.dtype):
                raise DataValidationError(f"{path}: not the shard its manifest recorded (shape or dtype)")
        block = rows_across(arrays, self.offset, self.count)
        if block.shape[0] != self.count:
            raise DataValidationError(f"{self.folder}: its shards hold fewer rows than its manifest records")
        return as_checked(block, self.norms, self.normalize)
