"""The threshold report of a pairs file (``mine`` / ``score --threshold-report``), written by the job beside its
pairs: a histogram of every candidate pair's score with the threshold marked (``OUT.threshold.png``) and a Markdown
sample of the pairs just above and just below it (``OUT.threshold.md``), so that a threshold can be picked by looking.
The dataset card (:mod:`bitext_hf.hub.dataset_card`) shows both when they lie beside the pairs it publishes.

matplotlib is imported when the figure is drawn, not with this module.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bitext_hf.io import OutputSet, figures
from bitext_hf.mining.sidecar import threshold_report_paths

__all__ = [
    "threshold_figure",
    "threshold_sample",
    "threshold_sample_markdown",
    "write_threshold_report",
]

logger = logging.getLogger("bitext_hf")


def threshold_sample(
    scores: np.ndarray, threshold: float | None, *, size: int = 10
) -> tuple[np.ndarray, np.ndarray, float]:
    """The positions of the ``size`` scores just at or above the threshold and of the ``size`` just below it (each in
    decreasing score order), and the threshold used: the median score when none was given."""
    scores = np.asarray(scores, dtype=np.float64)
    pivot = float(np.median(scores)) if threshold is None and scores.size else float(threshold or 0.0)
    order = np.argsort(-scores, kind="stable")
    above = order[scores[order] >= pivot]
    below = order[scores[order] < pivot]
    return above[-size:], below[:size], pivot


def _cell(text: str, width: int = 80) -> str:
    text = " ".join(text.split()).replace("|", "\\|")
    return text if len(text) <= width else text[: width - 1] + "…"


def threshold_sample_markdown(
    scores: np.ndarray,
    src_indices: np.ndarray,
    tgt_indices: np.ndarray,
    src_texts: Sequence[str] | None,
    tgt_texts: Sequence[str] | None,
    threshold: float | None,
    *,
    size: int = 10,
) -> str:
    """Markdown tables of the pairs just above and just below the threshold (the median without one): what a
    threshold keeps and drops at its edge. Line numbers are the inputs' (0-based)."""
    above, below, pivot = threshold_sample(scores, threshold, size=size)
    what = f"the threshold {pivot:g}" if threshold is not None else f"the median score {pivot:.4f} (no threshold)"
    parts = [f"Pairs just above and just below {what}, out of {len(scores)} candidates.\n"]
    titles = ("Just above (kept)", "Just below (dropped)") if threshold is not None else ("Just above", "Just below")
    for title, positions in zip(titles, (above, below)):
        parts.append(f"\n#### {title}\n\n| score | src | tgt | source | target |\n|---|---|---|---|---|\n")
        for position in positions.tolist():
            src, tgt = int(src_indices[position]), int(tgt_indices[position])
            source = _cell(src_texts[src]) if src_texts is not None else ""
            target = _cell(tgt_texts[tgt]) if tgt_texts is not None else ""
            parts.append(f"| {scores[position]:.4f} | {src} | {tgt} | {source} | {target} |\n")
        if not len(positions):
            parts.append("| | | | (none) | |\n")
    return "".join(parts)


def threshold_figure(
    scores: Sequence[float] | np.ndarray, *, threshold: float | None = None, margin: str = "ratio"
) -> tuple[Any, str]:
    """A histogram of every candidate pair of a run, before its threshold, the threshold marked: where it cuts the
    distribution (a run of translations shows a mode of high scores apart from the bulk of chance pairs). Returns the
    matplotlib figure and its caption."""
    values = np.asarray(scores, dtype=np.float64)
    if values.size == 0:
        raise ValueError("threshold_figure needs at least one score")
    bins = figures.histogram_bins(values, threshold=threshold)
    figure = figures.new_figure()
    axes = figure.add_subplot()
    if threshold is None:
        axes.hist(values, bins=bins, color=figures.PRIMARY_COLOUR, alpha=0.8, label=f"candidates (n={values.size})")
    else:
        kept = values >= threshold
        axes.hist(
            values[kept], bins=bins, color=figures.PRIMARY_COLOUR, alpha=0.8, label=f"kept (n={int(kept.sum())})"
        )
        axes.hist(
            values[~kept],
            bins=bins,
            color=figures.SECONDARY_COLOUR,
            alpha=0.8,
            label=f"below (n={int((~kept).sum())})",
        )
    figures.mark_threshold(axes, threshold)
    axes.set_xlabel(f"margin score ({margin} margin)")
    axes.set_ylabel("candidate pairs (count)")
    from matplotlib.ticker import MaxNLocator

    axes.yaxis.set_major_locator(MaxNLocator(integer=True))
    axes.set_title("Scores of the candidate pairs, before the threshold")
    axes.legend()
    caption = f"Scores of the {values.size} candidate pairs of the run ({margin} margin), before the threshold"
    if threshold is not None:
        share = 100 * float(np.mean(values >= threshold))
        caption += f"; the threshold {threshold:g} keeps {share:.1f}% of them"
    return figure, caption + "."


def write_threshold_report(
    outputs: OutputSet,
    out: str | os.PathLike,
    candidates: Any,
    src_texts: Sequence[str] | None,
    tgt_texts: Sequence[str] | None,
    *,
    threshold: float | None = None,
    margin: str = "ratio",
    size: int = 10,
) -> tuple[Path, Path] | None:
    """Write the threshold report of the pairs file ``out`` beside it (``mine`` / ``score --threshold-report``):
    :func:`threshold_figure` of the ``candidates`` (``MinedPairs`` before the threshold) and a Markdown sample of
    the pairs just above and just below the threshold (``out.threshold.png``, ``out.threshold.md``), each to its
    temporary file in ``outputs`` (where the job declared both, before its work), committed with the job's other
    outputs.

    Returns:
        The paths of the figure and of the sample; None (with a warning) when there is no candidate to draw.
    """
    if not len(candidates):
        logger.warning("--threshold-report: no candidate pairs, nothing to draw")
        return None
    figure_path, sample_path = threshold_report_paths(out)
    figure, caption = threshold_figure(candidates.scores, threshold=threshold, margin=margin)
    with outputs.open(figure_path, "wb") as handle:
        figure.savefig(handle, format="png", dpi=figures.DPI)
    sample = threshold_sample_markdown(
        candidates.scores,
        candidates.src_indices,
        candidates.tgt_indices,
        src_texts,
        tgt_texts,
        threshold,
        size=size,
    )
    with outputs.open(sample_path) as handle:
        handle.write(f"{caption}\n\n![threshold]({figure_path.name})\n\n{sample}")
    return figure_path, sample_path
