"""Pair quality: the probability that each pair is a translation (the light classifier of
``bitext_hf.modeling.pair_quality``, the default one shipped in this package), and what it says of a set of pairs
without gold: the estimated precision of the pairs above a threshold (the mean probability of those pairs) and the
expected number of correct ones (its sum), and the threshold whose pairs reach a wanted precision.

Why the mean probability estimates precision: a calibrated probability is, among the pairs given it, the share that
are translations, so the expected number of correct pairs in a set is the sum of their probabilities. The estimate is
as good as the calibration on the data at hand: benchmarks/README.md ("Pair quality") measures the gap to the true
precision on sets with gold pairs, and the README says where it cannot be trusted.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bitext_hf.errors import EncoderLoadError, UsageError

__all__ = [
    "CALIBRATION_BINS",
    "DEFAULT_CLASSIFIER",
    "DEFAULT_CLASSIFIER_PATH",
    "calibration_bins",
    "check_classifier_encoder",
    "classifier_for_run",
    "load_classifier",
    "pair_quality",
    "precision_at_thresholds",
    "precision_curve",
    "report_precision",
    "report_thresholds",
    "threshold_for_precision",
]

DEFAULT_CLASSIFIER = "default"
# Trained by recipes/train_pair_quality.py with recipes/configs/pair_quality.yaml (the embedded USE encoder).
DEFAULT_CLASSIFIER_PATH = Path(__file__).parent / "default_pair_quality"
# A light classifier's config (its feature statistics) is a few KiB and its weights a few hundred: far above, no file
# of a classifier.
MAX_CONFIG_BYTES = 1 << 20
MAX_WEIGHTS_BYTES = 64 << 20
CALIBRATION_BINS = 10


def load_classifier(name: str | os.PathLike = DEFAULT_CLASSIFIER, *, backend: str = "torch") -> Any:
    """The pair classifier ``name``: ``"default"`` (shipped in this package), a folder written by
    ``recipes/train_pair_quality.py`` (the light classifier) or ``recipes/train_pair_quality_cross_encoder.py`` (a
    cross-encoder, :mod:`~bitext_hf.mining.quality_cross_encoder`), or a Hub id of either. Loaded with the package's
    own code or the base's transformers class: no remote code is run, no pickle loaded. ``backend`` "onnx" or
    "openvino" runs a cross-encoder converted as the encoders are (the light classifier runs in torch: it is a few
    hundred multiply-adds a pair).

    Raises:
        UsageError: a backend other than torch for the light classifier (exit 2).
        EncoderLoadError: nothing loadable there, or not a pair classifier (exit 4).
    """
    from transformers import AutoConfig

    import bitext_hf.modeling.pair_quality  # noqa: F401  (registers the light family with AutoConfig and AutoModel)
    from bitext_hf.mining.quality_cross_encoder import CROSS_ENCODER_MARKER, CROSS_ENCODER_VARIANT, load_cross_encoder

    path = DEFAULT_CLASSIFIER_PATH if str(name) == DEFAULT_CLASSIFIER else name
    local = os.path.lexists(path)
    if local:
        settings = _local_config(Path(path), name)
    else:
        try:
            settings = AutoConfig.from_pretrained(str(path)).to_dict()
        except (OSError, ValueError) as error:
            first = " ".join(str(error).split())[:300]
            raise EncoderLoadError(f"--classifier {name}: cannot load a pair classifier there ({first})") from None
    if settings.get(CROSS_ENCODER_MARKER) == CROSS_ENCODER_VARIANT:
        return load_cross_encoder(path, settings, backend=backend)
    if backend != "torch":
        raise UsageError(
            f"--classifier {name}: a light classifier runs in torch (backend {backend!r} converts cross-encoders)"
        )
    if settings.get("model_type") != "bitext_pair_quality":
        raise EncoderLoadError(
            f"--classifier {name}: a {settings.get('model_type')!r} model, not a pair classifier (train one with "
            "recipes/train_pair_quality.py or recipes/train_pair_quality_cross_encoder.py)"
        )
    if local:
        _check_light_weights(Path(path), name)
    return _load_light(path, name)


def _load_light(path: str | os.PathLike, name: str | os.PathLike) -> Any:
    from transformers import AutoModel
    from transformers.utils import logging as transformers_logging

    from bitext_hf.modeling.pair_quality import PairQualityClassifier

    # A classifier of a few thousand weights loads at once: transformers' weight-loading bar would only be noise.
    shown = transformers_logging.is_progress_bar_enabled()
    transformers_logging.disable_progress_bar()
    try:
        model = AutoModel.from_pretrained(str(path), use_safetensors=True)  # never a pickle
    except (OSError, ValueError) as error:
        first = " ".join(str(error).split())[:300]
        raise EncoderLoadError(f"--classifier {name}: cannot load a pair classifier there ({first})") from None
    finally:
        if shown:
            transformers_logging.enable_progress_bar()
    if not isinstance(model, PairQualityClassifier):
        raise EncoderLoadError(f"--classifier {name}: loaded a {type(model).__name__}, not a PairQualityClassifier")
    return model.eval()


def _local_config(folder: Path, name: str | os.PathLike) -> dict[str, Any]:
    """The config.json of a local classifier folder, read without trusting the folder: a FIFO there would block the
    loader, a device feed it forever."""
    from bitext_hf.io.small_files import SmallFileError, read_small_json, regular_file_status

    if not folder.is_dir():
        raise EncoderLoadError(f"--classifier {name}: not a folder (a pair classifier is the folder its recipe wrote)")
    try:
        regular_file_status(folder / "config.json")
        settings = read_small_json(folder / "config.json", MAX_CONFIG_BYTES)
    except FileNotFoundError:
        raise EncoderLoadError(f"--classifier {name}: no config.json in the folder") from None
    except (SmallFileError, OSError) as error:
        raise EncoderLoadError(f"--classifier {name}: config.json is {error}") from None
    except (ValueError, RecursionError) as error:
        raise EncoderLoadError(f"--classifier {name}: config.json is not JSON ({error})") from None
    if not isinstance(settings, dict):
        raise EncoderLoadError(f"--classifier {name}: config.json is not a model configuration (a JSON object)")
    return settings


def _check_light_weights(folder: Path, name: str | os.PathLike) -> None:
    """A light classifier's model.safetensors is a regular file of a sane size (a pickled checkpoint is never read)."""
    from bitext_hf.io.small_files import SmallFileError, regular_file_status

    try:
        size = regular_file_status(folder / "model.safetensors").st_size
    except FileNotFoundError:
        raise EncoderLoadError(f"--classifier {name}: no model.safetensors in the folder") from None
    except (SmallFileError, OSError) as error:
        raise EncoderLoadError(f"--classifier {name}: model.safetensors is {error}") from None
    if size > MAX_WEIGHTS_BYTES:
        raise EncoderLoadError(
            f"--classifier {name}: model.safetensors is {size} bytes, more than a light pair classifier's "
            f"{MAX_WEIGHTS_BYTES}"
        )


def check_classifier_encoder(classifier: Any, encoder_identity: str, name: str | os.PathLike) -> None:
    """A classifier reads one encoder's cosine and margin: refuse another encoder (``UsageError``, exit 2)."""
    trained = getattr(classifier.config, "encoder", None)
    if trained and trained != encoder_identity:
        raise UsageError(
            f"--classifier {name} was trained on the cosines of the encoder {trained!r}, not {encoder_identity!r}: "
            "its probabilities would mean nothing here; use that encoder, or train a classifier for this one "
            "(recipes/train_pair_quality.py --encoder ...)"
        )


def classifier_for_run(
    name: str | os.PathLike,
    encoders: Sequence[str],
    *,
    backend: str = "torch",
    default_steps_aside: bool = False,
) -> tuple[Any, str | None]:
    """The classifier ``name`` of a job whose pairs the ``encoders`` scored (their identities; none known: a side
    given as embeddings), loaded and checked before any encoding: ``(classifier, None)``, or, when
    ``default_steps_aside`` (``score``, which rates pairs unasked) and the default classifier reads another encoder's
    cosines, ``(None, the line that says why there is no column)``. A classifier asked for (any in ``mine`` and
    ``align``, a named one in ``score``) that reads another encoder's cosines is refused (``UsageError``, exit 2): its
    probabilities would mean nothing there. A cross-encoder reads no encoder's scores and goes with any."""
    classifier = load_classifier(name, backend=backend)
    trained = getattr(classifier.config, "encoder", None)
    other = next((encoder for encoder in encoders if trained and encoder != trained), None)
    if default_steps_aside and str(name) == DEFAULT_CLASSIFIER and other is not None:
        return None, (
            f"no quality column: the default classifier reads the cosines of {trained}, not of {other} (give "
            "--classifier one trained on this encoder, or --classifier none to silence this)"
        )
    for encoder in dict.fromkeys(encoders):
        check_classifier_encoder(classifier, encoder, name)
    return classifier, None


def pair_quality(
    classifier: Any,
    sources: Sequence[str],
    targets: Sequence[str],
    cosines: np.ndarray,
    margins: np.ndarray,
) -> np.ndarray:
    """The calibrated probability that each pair is a translation (float32, one per pair)."""
    return classifier.score(list(sources), list(targets), np.asarray(cosines), np.asarray(margins)).numpy()


def calibration_bins(
    probabilities: Sequence[float], labels: Sequence[float], bins: int = CALIBRATION_BINS
) -> list[tuple[float, float, float]]:
    """The equal-width probability bins that hold pairs: (their share of the pairs, their mean probability, their
    share of translations), lowest bin first; a probability of 1 falls in the last bin. What a reliability diagram
    draws and the expected calibration error sums."""
    probabilities, labels = np.asarray(probabilities, dtype=np.float64), np.asarray(labels, dtype=np.float64)
    which = np.minimum((probabilities * bins).astype(np.int64), bins - 1)
    return [
        (float(inside.mean()), float(probabilities[inside].mean()), float(labels[inside].mean()))
        for inside in (which == index for index in range(bins))
        if inside.any()
    ]


def precision_at_thresholds(
    scores: np.ndarray, quality: np.ndarray, thresholds: Sequence[float]
) -> list[tuple[float, int, float, float]]:
    """For each threshold: (threshold, pairs at or above it, their estimated precision (mean quality; NaN for none),
    the expected number of correct pairs among them (sum of quality))."""
    scores, quality = np.asarray(scores, dtype=np.float64), np.asarray(quality, dtype=np.float64)
    rows = []
    for threshold in thresholds:
        kept = quality[scores >= threshold]
        rows.append(
            (float(threshold), int(kept.size), float(kept.mean()) if kept.size else float("nan"), float(kept.sum()))
        )
    return rows


def report_thresholds(scores: np.ndarray, threshold: float | None, count: int = 9) -> list[float]:
    """Where a threshold report tells the estimated precision: the deciles of the candidates' scores, and the run's
    ``threshold``."""
    points = np.quantile(np.asarray(scores, dtype=np.float64), np.linspace(0.1, 0.9, count)).round(4).tolist()
    return sorted({*points, *([threshold] if threshold is not None else [])})


def report_precision(candidates: Any, threshold: float | None) -> list[tuple[float, int, float, float]] | None:
    """The rows of a threshold report's precision table for ``candidates`` (``MinedPairs``; None without quality)."""
    if candidates is None or getattr(candidates, "quality", None) is None or not len(candidates.scores):
        return None
    return precision_at_thresholds(
        candidates.scores, candidates.quality, report_thresholds(candidates.scores, threshold)
    )


def precision_curve(scores: np.ndarray, quality: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every cut a threshold can make on ``scores`` (pairs with the same score fall on the same side): the threshold
    of each cut (highest first), the estimated precision of the pairs at or above it (mean quality) and their count."""
    scores, quality = np.asarray(scores, dtype=np.float64), np.asarray(quality, dtype=np.float64)
    order = np.argsort(-scores, kind="stable")
    ranked, cumulative = scores[order], np.cumsum(quality[order])
    ends = np.flatnonzero(np.append(ranked[1:] != ranked[:-1], True)) if ranked.size else np.zeros(0, np.int64)
    return ranked[ends], cumulative[ends] / (ends + 1), ends + 1


def threshold_for_precision(
    scores: np.ndarray, quality: np.ndarray, precision: float
) -> tuple[float, float, int] | None:
    """The lowest threshold on ``scores`` whose pairs (score >= threshold) have an estimated precision (mean quality)
    of at least ``precision``: (threshold, estimated precision, pairs kept), or None when no threshold reaches it
    (of the cuts of :func:`precision_curve` reaching it, the one keeping the most pairs)."""
    thresholds, means, kept = precision_curve(scores, quality)
    reaching = np.flatnonzero(means >= precision)
    if reaching.size == 0:
        return None
    best = reaching[-1]
    return float(thresholds[best]), float(means[best]), int(kept[best])
