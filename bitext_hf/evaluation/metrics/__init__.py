"""Bitext metrics: pure numpy functions (`bitext_hf.evaluation.metrics.functional`) and local `evaluate` modules.

>>> import evaluate
>>> from bitext_hf.evaluation.metrics import metric_path
>>> xsim = evaluate.load(str(metric_path("xsim")))  # offline, no hub access; load("xsim") is the same
>>> xsim.compute(source_embeddings=src, target_embeddings=tgt, k=4, margin="ratio")
"""

from __future__ import annotations

from pathlib import Path

from bitext_hf.evaluation.metrics.beads import alignment_f1
from bitext_hf.evaluation.metrics.functional import (
    bitext_accuracy,
    bucc_f1,
    bucc_labels,
    bucc_optimal_threshold,
    mteb_bitext_mining,
    xsim,
    xsim_from_knn,
    xsim_from_similarity,
    xsim_micro_average,
)

__all__ = [
    "METRIC_NAMES",
    "alignment_f1",
    "bitext_accuracy",
    "bucc_f1",
    "bucc_labels",
    "bucc_optimal_threshold",
    "load",
    "metric_path",
    "mteb_bitext_mining",
    "xsim",
    "xsim_from_knn",
    "xsim_from_similarity",
    "xsim_micro_average",
]

METRIC_NAMES: tuple[str, ...] = ("xsim", "bucc_f1", "bitext_accuracy", "mteb_bitext_mining", "alignment_f1")


def metric_path(name: str) -> Path:
    """Folder of the local `evaluate` module ``name`` (usable with ``evaluate.load(str(path))``)."""
    if name not in METRIC_NAMES:
        raise ValueError(f"unknown metric {name!r}; available: {', '.join(METRIC_NAMES)}")
    return Path(__file__).parent / name


def load(name: str, **kwargs):
    """Load a bitext metric as an `evaluate` module from this package (offline; nothing is fetched)."""
    import evaluate

    return evaluate.load(str(metric_path(name)), **kwargs)
