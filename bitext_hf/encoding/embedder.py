"""The encoder engine of a job (mining, alignment, encoding): :class:`Embedder` loads each encoder once, only when
the encoding cache does not hold the sentences for it, and sends the batches to Ray tasks when asked."""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from bitext_hf.encoders.spec import EncoderSpec

__all__ = ["Embedder"]

logger = logging.getLogger("bitext_hf")


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
    _ray_tokens: dict = field(default_factory=dict, init=False, repr=False)
    # What the run's report says: sentences encoded (and the seconds that took, loading the encoders included) and
    # sentences whose embeddings came from the cache.
    encoded: int = field(default=0, init=False)
    from_cache: int = field(default=0, init=False)
    encode_seconds: float = field(default=0.0, init=False)
    # What each encoder computed in, by spec ("float32 (torch)"): as the loaded encoder says, or, in Ray tasks, as
    # planned; an encoder that does not say (a test's fake) is left out.
    arithmetic: dict = field(default_factory=dict, init=False)

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
            encoder = self._encoders[spec] = load(spec, pooling=self.pooling, **options)
            if isinstance(getattr(encoder, "arithmetic", None), str):
                self.arithmetic[spec] = encoder.arithmetic
                name = spec if spec is not None else getattr(encoder, "name", "default")
                logger.info("encoder %s computes in %s", name, encoder.arithmetic)
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
            from bitext_hf.encoding.cache import EmbeddingCache

            self._cache = EmbeddingCache(self.cache_dir)
        return self._cache

    def embed(
        self,
        texts: list[str],
        what: str,
        spec: str | None = None,
        runs: tuple[Sequence[str], Sequence[tuple[int, int]]] | None = None,
    ) -> np.ndarray:
        """Embed ``texts`` with the encoder ``spec`` (default ``model``); ``what`` names them in the logs.

        ``runs``, ``(sentences, spans)``: each text is ``" ".join(sentences[start:end])`` for its span. An encoder
        with ``encode_runs(sentences, spans, show_progress=...)`` (the default encoder's torch runtime) then makes
        the vectors from one pass over the sentences (:mod:`bitext_hf.encoders.use_runs`); the texts are the cache's
        key either way."""
        spec = spec if spec is not None else self.model
        cache = self.cache
        key = cache.key(texts, spec, self.pooling, **self.runtime) if cache is not None else None
        if cache is not None and (cached := cache.load(key, len(texts))) is not None:
            logger.info("%d %s sentences: embeddings from the cache (%s)", len(texts), what, cache.path(key))
            self.from_cache += len(texts)
            return cached
        started = time.perf_counter()
        if runs is not None and len(runs[1]) != len(texts):
            raise ValueError(f"{len(runs[1])} runs for {len(texts)} texts")
        if self.distributed:  # mine and align --distributed ray: the batches go to the Ray workers too
            from bitext_hf.encoding.ray import encode_ray, encode_runs_ray, encoder_loader

            logger.info("encoding %d %s sentences in Ray tasks", len(texts), what)
            loader = encoder_loader(spec, pooling=self.pooling, batch_size=self.batch_size, **self.runtime)
            # One token a run and encoder: each worker loads the encoder once for all of this run's calls.
            token = self._ray_tokens.setdefault(spec, uuid.uuid4().hex)
            where = {"address": self.ray_address, "workers": self.workers, "what": what, "run_token": token}
            if runs is not None:  # a stretch of sentences a task: composed there where the encoder can
                embeddings = encode_runs_ray(*runs, loader, **where)
            else:
                embeddings = encode_ray(texts, loader, **where)
            if self.load_encoder is None:
                self.arithmetic[spec] = self.encoder_spec(spec).arithmetic
        else:
            logger.info("encoding %d %s sentences", len(texts), what)
            encoder = self.encoder(spec)
            if runs is not None and hasattr(encoder, "encode_runs"):
                embeddings = encoder.encode_runs(*runs, show_progress=self.show_progress)
            else:
                embeddings = encoder.encode(texts, batch_size=self.batch_size, show_progress=self.show_progress)
            if cache is not None and not self._as_planned(spec, encoder):
                cache = None
        self.encoded += len(texts)
        self.encode_seconds += time.perf_counter() - started
        if cache is not None:
            cache.store(key, embeddings)
        return embeddings

    def encoder_spec(self, model: str | None) -> EncoderSpec:
        """The encoder ``model`` with this run's pooling, quantize and backend, as the cache keys and manifests name
        it (:class:`~bitext_hf.encoders.EncoderSpec`)."""
        return EncoderSpec(model, self.pooling, self.quantize, self.backend)

    def _as_planned(self, spec: str | None, encoder) -> bool:
        """Whether ``encoder`` computed in what the cache key names; where it did not (a runtime that set the asked
        precision aside), its vectors are not stored under a name that is not theirs."""
        ran = getattr(encoder, "quantize", None), getattr(encoder, "backend", None)
        if not all(isinstance(value, str) for value in ran):
            return True  # an encoder that does not say (a test's fake)
        if ran != self.encoder_spec(spec).planned()[::-1]:
            logger.warning(
                "encoder %s computed in quantize=%r with %s, not as its cache key says: not cached", spec, *ran
            )
            return False
        return True
