"""The encoder engine of a job (mining, alignment, encoding): :class:`Embedder` loads each encoder once, only when
the encoding cache does not hold the sentences for it, and sends the batches to Ray tasks when asked."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from bitext_hf.encoders.exported import BACKENDS
from bitext_hf.encoders.huggingface import POOLINGS
from bitext_hf.encoders.precision import QUANTIZE_CHOICES
from bitext_hf.errors import UsageError
from bitext_hf.options import option, positive_int

__all__ = ["Embedder", "EncoderOptions", "RayOptions", "refuse_cache_dir_without_cache"]

logger = logging.getLogger("bitext_hf")


_ENCODER = "encoder"
_RAY = "distributed"


@dataclass(kw_only=True)
class EncoderOptions:
    """The encoder options every job shares (``mine``, ``encode``, ``align``, ``score``, ``eval``), declared once:
    each job's config inherits them, keyword-only, after its own fields; their metadata is the command line's options.

    Args:
        model (str, optional): encoder path or hub id (default: the embedded USE v3).
        pooling (str, optional): as :func:`bitext_hf.encoders.load_encoder` takes it.
        quantize (str, optional): as :func:`bitext_hf.encoders.load_encoder` takes it.
        backend (str, optional): as :func:`bitext_hf.encoders.load_encoder` takes it.
        batch_size (int, defaults to 128): sentences per encoder batch.
        max_line_chars (int, defaults to 10000): the longest line accepted.
        cache_dir (str, optional): the encoding cache's folder.
        no_cache (bool): no encoding cache at all.
    """

    model: str | None = field(
        default=None,
        metadata=option(
            "encoder: 'use-multilingual-v3' (default, embedded, no download), a sentence-transformers folder, or a "
            "Hugging Face model folder / cached hub id",
            group=_ENCODER,
        ),
    )
    pooling: str | None = field(
        default=None,
        metadata=option(
            "pooling for Hugging Face models (default mean); sentence-transformers models and USE pool their own way",
            choices=POOLINGS,
            group=_ENCODER,
        ),
    )
    quantize: str | None = field(
        default=None,
        metadata=option(
            "arithmetic of the encoders: none (float32); bf16 on a GPU, or on a CPU with bfloat16 kernels (AVX-512 "
            "and up: faster than float32 only with AMX or AVX512-BF16), refused on other CPUs (AVX2 only), where it "
            "would run emulated, many times slower; int8 (dynamic, CPU only: the model then runs on the CPU; not for "
            "USE); default auto: bf16 on a CPU with bfloat16 kernels, else float32 (on a GPU too); float32 for USE, "
            "whose bf16 moves its reference vectors. Speed and xsim of each: benchmarks/README.md, 'Encoder "
            "backends', 'On a GPU' and, for USE, 'Default encoder throughput'",
            choices=QUANTIZE_CHOICES,
            group=_ENCODER,
        ),
    )
    backend: str | None = field(
        default=None,
        metadata=option(
            "how Hugging Face and sentence-transformers models run: torch (default); onnx or openvino: converted when "
            "they load and run by ONNX Runtime (float32, --quantize int8; pip install 'bitext-hf[onnx]') or OpenVINO "
            "(float32; bf16 where OpenVINO computes it natively on the CPU, AVX512-BF16 or AMX, which auto then "
            "chooses, and refused elsewhere; pip install 'bitext-hf[openvino]') on the CPU",
            choices=BACKENDS,
            group=_ENCODER,
        ),
    )
    batch_size: int = field(
        default=128, metadata=option("sentences per encoder batch (default 128)", type=positive_int, group=_ENCODER)
    )
    max_line_chars: int = field(
        default=10_000,
        metadata=option(
            "an input line longer than this is a data error, exit 3 (default 10000)", type=positive_int, group=_ENCODER
        ),
    )
    cache_dir: str | None = field(
        default=None,
        metadata=option(
            "encoding cache: embeddings kept by the text's content and the encoder, so the same text is not encoded "
            "twice (default $BITEXT_HF_EMBEDDING_CACHE or ~/.cache/bitext-hf/embeddings; nothing is evicted)",
            group=_ENCODER,
        ),
    )
    no_cache: bool = field(default=False, metadata=option("neither read nor write the encoding cache", group=_ENCODER))

    def check_encoder_options(self) -> None:
        """What these options refuse together, beyond each field's own check (:func:`bitext_hf.options.check_fields`,
        which each job's config runs first): a cache folder with ``no_cache``, and an arithmetic or a backend the
        encoder would refuse when loaded (before any text is read)."""
        refuse_cache_dir_without_cache(self.cache_dir, self.no_cache)
        # What loading would refuse, refused now, before any text is read or any cache entry served: an explicit
        # bf16 this machine would not compute natively ("auto" falls back to float32), an exported backend or int8
        # for an encoder that runs neither (the default encoder).
        if self.quantize in ("bf16", "int8") or self.backend not in (None, "torch"):
            from bitext_hf.encoders.precision import runtime_label

            for spec in self._encoder_specs():
                runtime_label(spec, self.quantize, self.backend)

    def _encoder_specs(self) -> set:
        """The encoders a run may load: ``model``, or each side's (``src_model``, ``tgt_model``) where a job has them."""
        sides = [getattr(self, name, None) for name in ("src_model", "tgt_model")]
        return {side or self.model for side in sides} if any(sides) else {self.model}


@dataclass(kw_only=True)
class RayOptions:
    """The options of a job that can run in Ray tasks (``mine``, ``encode``), declared once.

    Args:
        distributed (str, optional): ``"ray"`` runs the job's encoding (and ``mine``'s search) in Ray tasks.
        ray_address (str, optional): the cluster to join (default: a local Ray instance).
        workers (int, optional): tasks at a time (default: the CPUs of the Ray instance).
    """

    distributed: str | None = field(
        default=None,
        metadata=option("run the job in parallel Ray tasks (same output)", choices=("ray",), group=_RAY),
    )
    ray_address: str | None = field(
        default=None,
        metadata=option(
            "join the Ray cluster at HOST:PORT, ray://HOST:PORT or auto (default: start a local Ray instance); an "
            "address that does not answer within 10 s is exit 2",
            group=_RAY,
        ),
    )
    workers: int | None = field(
        default=None,
        metadata=option("tasks at a time (default: the CPUs of the Ray instance)", type=positive_int, group=_RAY),
    )


def refuse_cache_dir_without_cache(cache_dir: str | None, no_cache: bool) -> None:
    """``--cache-dir`` names the encoding cache that ``--no-cache`` turns off: both at once is one line, exit 2."""
    if cache_dir is not None and no_cache:
        raise UsageError(f"--cache-dir {cache_dir} names the encoding cache, which --no-cache turns off: choose one")


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
            from bitext_hf.encoding.ray import encode_ray, encoder_loader

            logger.info("encoding %d %s sentences in Ray tasks", len(texts), what)
            loader = encoder_loader(spec, pooling=self.pooling, batch_size=self.batch_size, **self.runtime)
            embeddings = encode_ray(texts, loader, address=self.ray_address, workers=self.workers, what=what)
            if self.load_encoder is None:
                from bitext_hf.encoders.precision import planned_arithmetic

                self.arithmetic[spec] = planned_arithmetic(spec, self.quantize, self.backend)
        else:
            logger.info("encoding %d %s sentences", len(texts), what)
            encoder = self.encoder(spec)
            embeddings = encoder.encode(texts, batch_size=self.batch_size, show_progress=self.show_progress)
            if cache is not None and not self._as_planned(spec, encoder):
                cache = None
        self.encoded += len(texts)
        self.encode_seconds += time.perf_counter() - started
        if cache is not None:
            cache.store(key, embeddings)
        return embeddings

    def _as_planned(self, spec: str | None, encoder) -> bool:
        """Whether ``encoder`` computed in what the cache key names; where it did not (a runtime that set the asked
        precision aside), its vectors are not stored under a name that is not theirs."""
        ran = getattr(encoder, "quantize", None), getattr(encoder, "backend", None)
        if not all(isinstance(value, str) for value in ran):
            return True  # an encoder that does not say (a test's fake)
        from bitext_hf.encoders.precision import planned_runtime

        if ran != planned_runtime(spec, self.quantize, self.backend)[::-1]:
            logger.warning(
                "encoder %s computed in quantize=%r with %s, not as its cache key says: not cached", spec, *ran
            )
            return False
        return True
