"""The encoding job and its parts: text in, embeddings out, through the encoding cache, into one ``.npy`` file or a
folder of shards, in one process or in Ray tasks.

>>> from bitext_hf.encoding import EncodeConfig, run_encoding
>>> result = run_encoding(EncodeConfig(input="de.txt", out="de-shards/"))

- :mod:`~bitext_hf.encoding.job`: :func:`run_encoding` of an :class:`EncodeConfig` (``bitext-hf encode``).
- :mod:`~bitext_hf.encoding.embedder`: :class:`EncoderOptions` (the encoder options every job shares) and
  :class:`Embedder` (the encoder engine of every job: ``mine``, ``align``, ``encode``).
- :mod:`~bitext_hf.encoding.cache`: the encoding cache, embeddings kept on disk by content and encoder.
- :mod:`~bitext_hf.encoding.shards`: the shard folder format, written (:func:`write_shards`, resumable) and read
  (:func:`open_shards`, memory-mapped), with its manifest (``shard_manifest.py``) and rows named for a task to read
  (``shard_rows.py``).
- :mod:`~bitext_hf.encoding.ray`: Ray sessions (also those of ``mine``'s Ray search) and the Ray encoding.
"""

from __future__ import annotations

from bitext_hf.encoding.cache import EmbeddingCache, encoder_identity
from bitext_hf.encoding.embedder import Embedder, EncoderOptions, RayOptions
from bitext_hf.encoding.job import EncodeConfig, EncodingResult, run_encoding
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
    "EncodeConfig",
    "EncoderOptions",
    "EncodingResult",
    "Manifest",
    "RayOptions",
    "ShardedEmbeddings",
    "encoder_identity",
    "is_shard_folder",
    "open_shards",
    "read_manifest",
    "run_encoding",
    "write_shards",
]
