"""The encoding cache: embeddings of a list of sentences, kept on disk by content and encoder, so that running
``mine``, ``score`` or ``eval`` again on the same text does not encode it again (nor load the encoder).

An entry is one float32 ``.npy`` file named by the SHA-256 of (the sentences' SHA-256, their number, the encoder's
identity), written atomically: concurrent runs and killed runs leave whole entries or none. The encoder's identity
is its name and pooling; for a local model folder also the size and modification time of every file in it, so
retraining into the same folder does not return stale vectors (a hub id is keyed by its name). An entry that cannot
be read is a miss, and a failed write a warning: the cache never fails a run.

The folder is ``--cache-dir``, else ``$BITEXT_HF_EMBEDDING_CACHE``, else ``$XDG_CACHE_HOME/bitext-hf/embeddings``
(``~/.cache/bitext-hf/embeddings``). Nothing is evicted: delete the folder to reclaim the space.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from bitext_hf.errors import BitextError
from bitext_hf.io import atomic_output
from bitext_hf.mining.shards import text_sha256

__all__ = ["ENV_CACHE_DIR", "EmbeddingCache", "default_cache_dir", "encoder_identity"]

logger = logging.getLogger("bitext_hf")

ENV_CACHE_DIR = "BITEXT_HF_EMBEDDING_CACHE"
_KEY_VERSION = 1


def default_cache_dir() -> Path:
    """``$BITEXT_HF_EMBEDDING_CACHE``, else ``$XDG_CACHE_HOME/bitext-hf/embeddings`` (``~/.cache`` by default)."""
    if os.environ.get(ENV_CACHE_DIR):
        return Path(os.environ[ENV_CACHE_DIR])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "bitext-hf" / "embeddings"


def encoder_identity(spec: str | os.PathLike | None, pooling: str | None = None) -> str:
    """How manifests and sidecars name an encoder: its spec (the default's name for None) and pooling."""
    from bitext_hf.encoders import DEFAULT_ENCODER

    name = DEFAULT_ENCODER if spec is None or str(spec) in ("default", "use") else os.fspath(spec)
    return f"{name} ({pooling} pooling)" if pooling else name


def _folder_fingerprint(path: str) -> list:
    """(relative path, size, mtime) of every file under a local model folder: stat calls only, no reading."""
    entries = []
    for root, folders, files in os.walk(path):
        folders.sort()
        for name in sorted(files):
            full = os.path.join(root, name)
            with contextlib.suppress(OSError):
                stat = os.stat(full)
                entries.append([os.path.relpath(full, path), stat.st_size, stat.st_mtime_ns])
    return entries


class EmbeddingCache:
    """Embeddings on disk under ``root``, keyed by the sentences and the encoder (see the module docstring)."""

    def __init__(self, root: str | os.PathLike | None = None) -> None:
        self.root = Path(root) if root is not None else default_cache_dir()

    def key(self, texts: Sequence[str], spec: str | os.PathLike | None, pooling: str | None = None) -> str:
        identity: dict = {"encoder": encoder_identity(spec, pooling)}
        if spec is not None and os.path.isdir(spec):
            identity["folder"] = os.path.realpath(spec)
            identity["files"] = _folder_fingerprint(os.fspath(spec))
        payload = {"version": _KEY_VERSION, "texts": text_sha256(texts), "count": len(texts), **identity}
        return hashlib.sha256(json.dumps(payload, sort_keys=True).encode("utf-8")).hexdigest()

    def path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.npy"

    def load(self, key: str, count: int) -> np.ndarray | None:
        """The cached float32 (count, d) embeddings, or None (absent, unreadable, or of another shape)."""
        path = self.path(key)
        if not path.is_file():
            return None
        from bitext_hf.data.embeddings import read_embeddings

        try:
            array = np.array(read_embeddings(path))  # read whole: callers get a plain writable array, as encode gives
        except (OSError, BitextError) as error:
            logger.warning("%s: unreadable cache entry, encoding again (%s)", path, error)
            return None
        if array.dtype != np.float32 or array.shape[0] != count:
            logger.warning("%s: cache entry of shape %s %s, encoding again", path, array.shape, array.dtype)
            return None
        return array

    def store(self, key: str, embeddings: np.ndarray) -> None:
        path = self.path(key)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with atomic_output(path, "wb") as handle:
                np.save(handle, np.ascontiguousarray(embeddings, dtype=np.float32), allow_pickle=False)
        except (OSError, BitextError) as error:
            logger.warning("%s: could not write the encoding cache (%s); continuing without it", path, error)
