"""The encoding job: ``run_encoding(EncodeConfig)`` embeds a text file, one sentence a line, into one ``.npy`` file
or a folder of shards with a manifest (resumable, optionally encoded by Ray tasks), through the encoding cache.
``bitext-hf encode`` calls it; Python users call the same thing.

Everything cheap is checked before the text is read: the options, Ray's address, the output against the input, a
shard folder's state.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

import numpy as np

from bitext_hf.encoding.shard_manifest import DTYPES
from bitext_hf.errors import UsageError
from bitext_hf.jobs.base import ReportLine, per_second, shown_path
from bitext_hf.jobs.option_fields import check_fields, option, positive_int
from bitext_hf.jobs.options import QUIET, EncoderOptions, RayOptions

if TYPE_CHECKING:
    from bitext_hf.jobs.base import JobOutputs

__all__ = ["EncodeConfig", "EncodingResult", "encoding_report", "run_encoding"]

logger = logging.getLogger("bitext_hf")


@dataclass
class EncodeConfig(RayOptions, EncoderOptions):
    """One encoding run; the fields are ``bitext-hf encode``'s options. Checked when made.

    The encoder, its cache and the input's longest line are
    :class:`~bitext_hf.jobs.options.EncoderOptions`' fields (``model``, ``pooling``, ``quantize``, ``backend``,
    ``batch_size``, ``max_line_chars``, ``cache_dir``, ``no_cache``), as for ``mine``.

    Args:
        input (str): UTF-8 text, one sentence a line (``-`` for stdin, compressed files too).
        out (str): a ``.npy`` file, or a folder (new or empty, or a path ending in ``/`` or without a file
            extension) for shards and a manifest.
        shard_size (int, optional): a folder's rows per shard (default
            :data:`~bitext_hf.encoding.shards.DEFAULT_SHARD_SIZE`).
        dtype (str): the stored precision, "float32" or "float16".
        resume (bool): continue an unfinished folder after its last complete shard.
        distributed (str, optional): ``"ray"`` encodes the shards of a folder in Ray tasks.
        ray_address (str, optional): the Ray cluster to join (default: a local Ray instance).
        workers (int, optional): Ray tasks at a time.
        quiet (bool): no progress bars.
    """

    option_groups: ClassVar[dict[str, tuple[str, str | None]]] = {"shards": ("shards", None)}

    input: str = field(
        metadata=option("UTF-8 text file, one sentence a line (.gz/.xz/.bz2/.zst, - stdin)", required=True)
    )
    out: str = field(
        metadata=option(
            "output .npy (L2-normalized rows), never over the input; a folder (new or empty, or a path ending in / or "
            "without a file extension) gets shards and a manifest",
            required=True,
        )
    )
    shard_size: int | None = field(
        default=None,
        metadata=option("rows per shard of a folder --out (default 1000000)", type=positive_int, group="shards"),
    )
    dtype: str = field(
        default="float32",
        metadata=option(
            "stored precision (default float32; float16 halves the disk and is renormalized when read)",
            choices=DTYPES,  # what a shard folder and its manifest hold; an integer type would write zeros
            group="shards",
        ),
    )
    resume: bool = field(
        default=False,
        metadata=option("continue an unfinished folder --out after its last complete shard", group="shards"),
    )
    quiet: bool = field(default=False, metadata=QUIET)

    def __post_init__(self) -> None:
        check_fields(self)
        self.check_encoder_options()
        self.check_ray_options()

    @property
    def sharded(self) -> bool:
        """Whether ``out`` is a folder of shards: a path ending in a separator, an existing folder, or a new path
        without a file extension (``emb.de`` or ``x.npy`` stay one file)."""
        out = self.out
        if out == "-" or not out.strip():
            return False
        if out.endswith(("/", os.sep)) or os.path.isdir(out):
            return True
        return not os.path.exists(out) and not Path(out).suffix


@dataclass
class EncodingResult:
    """What a run wrote: ``count`` x ``dimension`` embeddings of ``dtype`` in ``path`` (``shards`` shard files and a
    manifest, or one ``.npy`` file when ``shards`` is None); ``encoded`` sentences encoded by this run (a resumed
    run's or a cached run's can be fewer than ``count``), ``from_cache`` taken from the encoding cache;
    ``arithmetic`` what the vectors were computed in (``"float32 (torch)"``, ``"bfloat16 (openvino)"``): the loaded
    encoder's own word, else what the cache entry or the Ray tasks were keyed and loaded by; None for an encoder of a
    given ``load_encoder`` that does not say."""

    path: str
    count: int
    dimension: int
    dtype: str
    shards: int | None
    encoded: int
    from_cache: int
    seconds: float
    arithmetic: str | None = None


def encoding_report(result: EncodingResult, seconds: float) -> list[ReportLine]:
    """What ``bitext-hf encode`` prints when it ends: what it wrote, and what the encoder really computed in
    (bfloat16 or float32, and which runtime: a CPU without native bfloat16 never runs it, and a converted graph may
    set a request aside); then the rate over the whole command's ``seconds`` (a resumed run's over what it encoded
    itself)."""
    computed = f"; computed in {result.arithmetic}" if result.arithmetic else ""
    if result.shards is None:
        wrote = f"wrote {result.count} x {result.dimension} {result.dtype} embeddings to {shown_path(result.path)}"
        return [ReportLine(wrote + computed), ReportLine(_rate_line(result.count, seconds), "timing")]
    lines = [
        ReportLine(
            f"wrote {result.count} x {result.dimension} {result.dtype} embeddings in {result.shards} shard(s) and "
            f"{os.path.join(result.path, 'manifest.json')} ({result.encoded} sentences encoded by this run){computed}"
        )
    ]
    if result.encoded:
        lines.append(ReportLine(_rate_line(result.encoded, seconds, " encoded"), "timing"))
    return lines


def _rate_line(sentences: int, seconds: float, detail: str = "") -> str:
    return f"encode: {sentences} sentences{detail} in {seconds:.1f} s, {per_second(sentences, seconds)} sentences/s"


def run_encoding(config: EncodeConfig, *, load_encoder=None) -> EncodingResult:
    """Run ``config``: check, read, encode (the cache first), write (a folder: shard by shard, memory one shard, the
    manifest last; one ``.npy``: planned before the text is read, written to a temporary file and committed, or
    written directly to a stream). ``load_encoder`` replaces ``bitext_hf.encoders.load_encoder`` (tests, custom
    models)."""
    from bitext_hf.jobs.base import job_run

    started = time.perf_counter()
    # The input protected from every file the run writes, a shard behind a link included.
    with job_run(config, inputs=[config.input]) as outputs:
        return _run(config, load_encoder, outputs, started)


def _run(config: EncodeConfig, load_encoder, outputs: JobOutputs, started: float) -> EncodingResult:
    from bitext_hf.data import read_lines
    from bitext_hf.encoding.embedder import Embedder

    if config.distributed:
        from bitext_hf.encoding.ray import check_ray

        check_ray(config.ray_address)
    embedder = Embedder.from_options(config, load_encoder)
    if config.sharded:
        result = _encode_shards(config, embedder, started)
        return dataclasses.replace(result, arithmetic=_arithmetic(config, embedder, load_encoder))
    if config.distributed:
        raise UsageError(f"--distributed ray writes a folder of shards; end --out with / ({config.out} is one file)")
    if config.shard_size is not None or config.resume:
        raise UsageError(
            f"--shard-size and --resume are for a folder --out; {config.out} is written as one .npy file "
            "(end the path with / for shards)"
        )
    outputs.add_out(config.out)  # a file, committed at the end; or a stream (`-`, a FIFO), written directly
    texts = read_lines(config.input, max_chars=config.max_line_chars)
    embeddings = embedder.embed(texts, "input").astype(config.dtype)
    with outputs.open(config.out, "wb") as handle:
        # numpy asks a real file for its position, which a pipe has not: a stream gets the array in chunks instead.
        np.save(_Chunks(handle) if outputs.is_stream(config.out) else handle, embeddings)
    outputs.commit()
    count, dimension = embeddings.shape
    seconds = time.perf_counter() - started
    return EncodingResult(
        config.out,
        count,
        dimension,
        config.dtype,
        None,
        embedder.encoded,
        embedder.from_cache,
        seconds,
        _arithmetic(config, embedder, load_encoder),
    )


class _Chunks:
    """A stream as numpy sees a file object that is no real file: written a chunk at a time (``write`` only)."""

    def __init__(self, handle) -> None:
        self.write = handle.write


def _arithmetic(config: EncodeConfig, embedder, load_encoder) -> str | None:
    """What ``config``'s vectors were computed in (:attr:`EncodingResult.arithmetic`)."""
    if config.model in embedder.arithmetic:
        return embedder.arithmetic[config.model]
    if load_encoder is not None:
        return None
    return config.encoder_spec().arithmetic


def _encode_shards(config: EncodeConfig, embedder, started: float) -> EncodingResult:
    from bitext_hf.data import read_lines
    from bitext_hf.encoding.shards import DEFAULT_SHARD_SIZE, check_shard_folder, write_shards

    check_shard_folder(config.out, resume=config.resume)  # before reading: a wrong folder costs nothing
    texts = read_lines(config.input, max_chars=config.max_line_chars)
    # Whole-text entries only: a run cut short resumes from its shards (--resume), and the shards of a run are
    # its durable copy, so entries per shard would only hold every shard twice on disk. A sharded run does not
    # write an entry either: that would hold the whole text in memory, which shards exist to avoid.
    cache = embedder.cache
    runtime = (config.model, config.pooling, config.quantize, config.backend)
    key = cache.key(texts, *runtime) if cache is not None else None
    cached = cache.load(key, len(texts)) if cache is not None else None

    def encode(batch: list[str]) -> np.ndarray:  # the encoder is loaded at the first shard left to encode
        return embedder.encoder(config.model).encode(batch, batch_size=config.batch_size, show_progress=False)

    settings = dict(
        encoder=config.encoder_spec().identity,
        shard_size=config.shard_size or DEFAULT_SHARD_SIZE,
        dtype=config.dtype,
        resume=config.resume,
        show_progress=not config.quiet,
    )
    if cached is not None:  # the encoder is never loaded
        logger.info("%d input sentences: embeddings from the cache", len(texts))
        manifest, encoded = write_shards(config.out, texts, encode, embeddings=cached, **settings)
    elif config.distributed:
        from bitext_hf.encoding.ray import encode_shards_ray, encoder_loader

        loader = encoder_loader(
            config.model,
            pooling=config.pooling,
            batch_size=config.batch_size,
            quantize=config.quantize,
            backend=config.backend,
        )
        manifest, encoded = encode_shards_ray(
            config.out, texts, loader, address=config.ray_address, workers=config.workers, **settings
        )
    else:
        manifest, encoded = write_shards(config.out, texts, encode, **settings)
    seconds = time.perf_counter() - started
    from_cache = len(texts) if cached is not None else 0
    return EncodingResult(
        config.out,
        manifest.count,
        manifest.dimension,
        manifest.dtype,
        len(manifest.shards),
        encoded,
        from_cache,
        seconds,
    )
