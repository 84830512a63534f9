"""The inputs of a mining job, read before any expensive work: the sentences or embeddings of each side, document
ids, gold pairs, and the :class:`Embedder` that encodes sentences (each encoder loaded once, only when needed;
the encoding cache consulted first).

Messages name the options as ``bitext-hf mine`` spells them (``--src-text`` is ``MiningConfig.src_text``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from bitext_hf.errors import DataValidationError, UsageError
from bitext_hf.io import check_output_path, protect_inputs

__all__ = [
    "Embedder",
    "Side",
    "check_inputs_and_output",
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
    from bitext_hf.mining.shards import is_shard_folder

    return is_npy(path) or is_shard_folder(path)


def check_inputs_and_output(out: str | None, inputs: Sequence[str | None]) -> None:
    """Cheap checks before any reading: at most one input is stdin (``-``), and ``out`` (when given) is a writable
    path that is none of the inputs (writing it would destroy that input). The inputs stay protected for the rest
    of the command: no file it writes (sidecar, shards, cache entries) may replace one (``protect_inputs``)."""
    stdin = [path for path in inputs if path == "-"]
    if len(stdin) > 1:
        raise UsageError("only one input can be read from stdin ('-')")
    protect_inputs(inputs)
    if out is not None:
        check_output_path(out, inputs=tuple(inputs), option="--out")


# ----------------------------------------------------------------------------------------------------- encoders


@dataclass
class Embedder:
    """Encodes sentences for one run: each encoder (``spec``, default ``model``) is loaded once, and not at all when
    the encoding cache holds the sentences for it; with ``distributed="ray"`` the batches go to Ray tasks.

    Encoders come from ``bitext_hf.encoders.load_encoder``, looked up at each load (so a test can replace it), or
    from ``load_encoder`` when given: ``load_encoder(spec, pooling=...)`` returning an object with
    ``encode(texts, batch_size=..., show_progress=...) -> (n, d) float32``.
    """

    model: str | None = None
    pooling: str | None = None
    quantize: str | None = None
    backend: str | None = None
    batch_size: int = 128
    cache_dir: str | None = None
    no_cache: bool = False
    show_progress: bool = True
    distributed: str | None = None
    ray_address: str | None = None
    workers: int | None = None
    load_encoder: Any = None
    _encoders: dict = field(default_factory=dict, init=False, repr=False)
    _cache: Any = field(default=None, init=False, repr=False)
    # What the run's report says: sentences encoded (and the seconds that took, loading the encoders included) and
    # sentences whose embeddings came from the cache.
    encoded: int = field(default=0, init=False)
    from_cache: int = field(default=0, init=False)
    encode_seconds: float = field(default=0.0, init=False)

    @classmethod
    def from_options(cls, options: Any, load_encoder: Any = None) -> Embedder:
        """The embedder of a job's config or parsed arguments: its encoder, cache and Ray fields by name (a field it
        lacks keeps the default; ``quiet`` turns the progress bars off)."""
        fields = ("model", "pooling", "quantize", "backend", "batch_size", "cache_dir", "no_cache")
        fields += ("distributed", "ray_address", "workers")
        values = {name: getattr(options, name) for name in fields if hasattr(options, name)}
        return cls(**values, show_progress=not getattr(options, "quiet", False), load_encoder=load_encoder)

    def encoder(self, spec: str | None):
        """The encoder ``spec`` (None: the default encoder), loaded at its first use."""
        if spec not in self._encoders:
            # Looked up at call time (not imported at module level) so that --help does not import torch.
            from bitext_hf import encoders

            load = self.load_encoder or encoders.load_encoder
            # These options only when asked: a replaced loader (a test's fake) need not know them.
            options = {name: value for name, value in self.runtime.items() if value is not None}
            self._encoders[spec] = load(spec, pooling=self.pooling, **options)
        return self._encoders[spec]

    @property
    def runtime(self) -> dict:
        """What the encoders compute in: ``quantize`` and ``backend`` as ``load_encoder`` takes them."""
        return {"quantize": self.quantize, "backend": self.backend}

    @property
    def cache(self):
        """The encoding cache of ``cache_dir`` (None with ``no_cache``). One per run: it warns once about a cache
        it cannot write, however many sides are embedded."""
        if self.no_cache:
            return None
        if self._cache is None:
            from bitext_hf.mining.embedding_cache import EmbeddingCache

            self._cache = EmbeddingCache(self.cache_dir)
        return self._cache

    def embed(self, texts: list[str], what: str, spec: str | None = None) -> np.ndarray:
        """Embed ``texts`` with the encoder ``spec`` (default ``model``); ``what`` names them in the logs."""
        spec = spec if spec is not None else self.model
        cache = self.cache
        key = cache.key(texts, spec, self.pooling, **self.runtime) if cache is not None else None
        if cache is not None and (cached := cache.load(key, len(texts))) is not None:
            logger.info("%d %s sentences: embeddings from the cache (%s)", len(texts), what, cache.path(key))
            self.from_cache += len(texts)
            return cached
        started = time.perf_counter()
        if self.distributed:  # mine --distributed ray: the batches go to the Ray workers too
            from bitext_hf.mining.distributed import encode_ray, encoder_loader

            logger.info("encoding %d %s sentences in Ray tasks", len(texts), what)
            loader = encoder_loader(spec, pooling=self.pooling, batch_size=self.batch_size, **self.runtime)
            embeddings = encode_ray(texts, loader, address=self.ray_address, workers=self.workers, what=what)
        else:
            logger.info("encoding %d %s sentences", len(texts), what)
            embeddings = self.encoder(spec).encode(texts, batch_size=self.batch_size, show_progress=self.show_progress)
        self.encoded += len(texts)
        self.encode_seconds += time.perf_counter() - started
        if cache is not None:
            cache.store(key, embeddings)
        return embeddings


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


def read_side(path: str, text_path: str | None, what: str, *, max_line_chars: int = 10_000) -> Side:
    """Read a side: a text file, or a .npy file or a folder of shards with, optionally, the text file of its
    sentences (``--src-text``: one line per embedding row; checked against a manifest's text checksum). ``what``
    is ``src`` or ``tgt``; a line longer than ``max_line_chars`` is a data error."""
    from bitext_hf.data import read_embeddings, read_lines
    from bitext_hf.mining.knn import check_embeddings
    from bitext_hf.mining.shards import is_shard_folder, open_shards, text_sha256

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
