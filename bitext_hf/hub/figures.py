"""Figures for model and dataset cards, saved as PNG: xsim heatmap, margin distributions, training curve.

Each function draws one figure with matplotlib's object API on the Agg canvas (:mod:`bitext_hf.io.figures`: no
pyplot, no global backend switch, no display needed), writes it atomically to ``path`` and returns a :class:`CardFigure`: the file and a
caption that states what the figure shows and its key numbers. Pass the figures to
``render_model_card(..., figures=...)`` (the card shows them) and ``save_for_hub(..., figures=...)`` (the files
travel with the checkpoint); a ``CardFigure`` is path-like. The threshold report of a mining run is written beside its
pairs (:mod:`bitext_hf.data.pair_files`).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bitext_hf.io.figures import (
    PRIMARY_COLOUR,
    SECONDARY_COLOUR,
    CardFigure,
    histogram_bins,
    mark_threshold,
    new_figure,
    save_figure,
)

__all__ = [
    "CardFigure",
    "card_figures",
    "load_log_history",
    "margin_distribution",
    "rejected_by_kind",
    "reliability_diagram",
    "score_histogram",
    "training_curve",
    "xsim_by_series",
    "xsim_heatmap",
]


def _direction(key: Any, target: str) -> tuple[str, str]:
    if isinstance(key, tuple) and len(key) == 2:
        return str(key[0]), str(key[1])
    text = str(key)
    for separator in ("->", "→", "-", "_"):
        if separator in text:
            source, _, tail = text.partition(separator)
            return source, tail
    return text, target


def xsim_heatmap(
    xsim: Mapping[Any, float],
    path: str | os.PathLike,
    *,
    target: str = "en",
    title: str = "xsim by direction (lower is better)",
) -> CardFigure:
    """A heatmap of xsim (margin-based error rate, %) with source languages as rows and targets as columns.

    Args:
        xsim: xsim in percent by direction: ``(src, tgt)`` tuples, ``"src-tgt"`` / ``"src->tgt"`` strings, or a
            bare language code meaning ``language -> target``. When both directions of a pair are evaluated, both
            cells are filled; directions not evaluated are grey.
        path: the PNG file to write.
        target: the target language of bare language keys.
    """
    cells = {_direction(key, target): float(value) for key, value in xsim.items() if value is not None}
    if not cells:
        raise ValueError("xsim_heatmap needs at least one evaluated direction")
    sources = sorted({source for source, _ in cells})
    targets = sorted({tgt for _, tgt in cells})
    grid = np.full((len(sources), len(targets)), np.nan)
    for (source, tgt), value in cells.items():
        grid[sources.index(source), targets.index(tgt)] = value
    figure = new_figure(max(4.0, 1.1 * len(targets) + 2.8), max(3.0, 0.55 * len(sources) + 1.6))
    axes = figure.add_subplot()
    from matplotlib import colormaps

    colours = colormaps["RdYlGn_r"].with_extremes(bad="#dddddd")
    # Fixed 0-100 scale: the colour of a cell means the same error rate in every card.
    image = axes.imshow(np.ma.masked_invalid(grid), cmap=colours, vmin=0.0, vmax=100.0, aspect="auto")
    for row, column in np.ndindex(grid.shape):
        value = grid[row, column]
        label = "n/a" if math.isnan(value) else f"{value:.1f}"
        axes.text(column, row, label, ha="center", va="center", fontsize=10, color="black")
    axes.set_xticks(range(len(targets)), targets)
    axes.set_yticks(range(len(sources)), sources)
    axes.set_xlabel("target language")
    axes.set_ylabel("source language")
    axes.set_title(title)
    figure.colorbar(image, ax=axes, label="xsim error rate (%)")
    directions = ", ".join(f"{s}→{t} {v:.2f}%" for (s, t), v in sorted(cells.items()))
    caption = (
        f"xsim (LASER's margin-based error rate, %, lower is better) by direction: {directions}. Green cells are "
        "directions the model retrieves well, red ones where it fails; grey: not evaluated."
    )
    return save_figure(figure, path, caption)


def margin_distribution(
    gold_scores: Sequence[float] | np.ndarray,
    random_scores: Sequence[float] | np.ndarray,
    path: str | os.PathLike,
    *,
    threshold: float | None = None,
    margin: str = "ratio",
) -> CardFigure:
    """Histograms of the margin scores of held-out gold pairs and of random pairs, the threshold marked.

    The further apart the two, the better the encoder separates translations from non-translations; the caption
    gives the share of each above the threshold (gold kept, random let through).
    """
    gold, random = np.asarray(gold_scores, dtype=np.float64), np.asarray(random_scores, dtype=np.float64)
    if gold.size == 0 or random.size == 0:
        raise ValueError("margin_distribution needs gold and random scores")
    bins = histogram_bins(gold, random, threshold=threshold)
    figure = new_figure()
    axes = figure.add_subplot()
    axes.hist(
        random, bins=bins, density=True, alpha=0.55, color=SECONDARY_COLOUR, label=f"random pairs (n={random.size})"
    )
    axes.hist(gold, bins=bins, density=True, alpha=0.55, color=PRIMARY_COLOUR, label=f"gold pairs (n={gold.size})")
    mark_threshold(axes, threshold)
    axes.set_xlabel(f"margin score ({margin} margin)")
    axes.set_ylabel("density (share of pairs per unit of margin)")
    axes.set_title("Margin scores: held-out gold pairs vs random pairs")
    axes.legend()
    caption = (
        f"Distribution of {margin}-margin scores of {gold.size} held-out gold pairs and {random.size} random pairs"
    )
    if threshold is not None:
        kept, leaked = 100 * float(np.mean(gold >= threshold)), 100 * float(np.mean(random >= threshold))
        caption += (
            f"; at the threshold {threshold:g}, {kept:.1f}% of gold pairs and {leaked:.1f}% of random pairs pass"
        )
    caption += ". The less the two histograms overlap, the better the encoder tells translations from random pairs"
    return save_figure(figure, path, caption + ".")


def reliability_diagram(
    predictions: Mapping[str, tuple[Sequence[float], Sequence[float]]], path: str | os.PathLike, *, bins: int = 10
) -> CardFigure:
    """A classifier's calibration: for each set (name -> (probabilities, labels)), the share of positives against the
    mean predicted probability in equal-width bins; the diagonal is perfect calibration."""
    from bitext_hf.mining.quality import calibration_bins

    if not predictions:
        raise ValueError("reliability_diagram needs at least one set of predictions")
    figure = new_figure()
    axes = figure.add_subplot()
    axes.plot([0, 1], [0, 1], color="grey", linestyle="--", linewidth=1, label="perfect calibration")
    worst = 0.0
    for name, (probabilities, labels) in predictions.items():
        points = [(mean, positive) for _, mean, positive in calibration_bins(probabilities, labels, bins)]
        worst = max([worst, *(abs(x - y) for x, y in points)])
        axes.plot(*zip(*points), marker="o", label=f"{name} (n={len(probabilities)})")
    axes.set_xlim(0, 1)
    axes.set_ylim(0, 1)
    axes.set_xlabel("predicted probability of a translation")
    axes.set_ylabel("share of translations")
    axes.set_title("Reliability of the predicted probabilities")
    axes.legend(fontsize=7)
    caption = (
        f"Predicted probability against the share of translations in bins of {1 / bins:g}, per held-out set; the "
        f"largest gap of a bin to the diagonal is {worst:.2f}"
    )
    return save_figure(figure, path, caption + ".")


def rejected_by_kind(results: Mapping[str, Mapping[str, float]], path: str | os.PathLike) -> CardFigure:
    """The share of each kind of wrong pair a classifier rejects, per set (name -> {"rejected/<kind>": share})."""
    kinds = sorted(
        {key.split("/", 1)[1] for values in results.values() for key in values if key.startswith("rejected/")}
    )
    if not kinds:
        raise ValueError("rejected_by_kind needs rejected/<kind> shares")
    figure = new_figure(width=8, height=4)
    axes = figure.add_subplot()
    width = 0.8 / len(results)
    for index, (name, values) in enumerate(results.items()):
        shares = [values.get(f"rejected/{kind}", np.nan) for kind in kinds]
        axes.bar(np.arange(len(kinds)) + index * width, shares, width, label=name)
    axes.set_xticks(np.arange(len(kinds)) + 0.4 - width / 2, kinds, rotation=30, ha="right")
    axes.set_ylim(0, 1)
    axes.set_ylabel("share rejected (probability < 0.5)")
    axes.set_title("Wrong pairs rejected, by kind")
    axes.legend(fontsize=7)
    weakest = min(
        kinds, key=lambda kind: np.nanmean([values.get(f"rejected/{kind}", np.nan) for values in results.values()])
    )
    caption = f"Share of each kind of wrong pair rejected, per set; the hardest kind is {weakest}"
    return save_figure(figure, path, caption + ".")


def score_histogram(
    scores: Sequence[float] | np.ndarray,
    path: str | os.PathLike,
    *,
    threshold: float | None = None,
    margin: str = "ratio",
) -> CardFigure:
    """A histogram of the scores of mined pairs (a dataset card's figure), the mining threshold marked."""
    values = np.asarray(scores, dtype=np.float64)
    if values.size == 0:
        raise ValueError("score_histogram needs at least one score")
    figure = new_figure()
    axes = figure.add_subplot()
    axes.hist(
        values,
        bins=histogram_bins(values, threshold=threshold),
        color=PRIMARY_COLOUR,
        alpha=0.8,
        label=f"pairs (n={values.size})",
    )
    mark_threshold(axes, threshold)
    axes.set_xlabel(f"margin score ({margin} margin)")
    axes.set_ylabel("mined pairs (count)")
    from matplotlib.ticker import MaxNLocator

    axes.yaxis.set_major_locator(MaxNLocator(integer=True))  # counts of pairs: no 2.5 ticks
    axes.set_title("Scores of the mined pairs")
    axes.legend()
    quartiles = np.percentile(values, [25, 50, 75])
    caption = (
        f"Scores of the {values.size} mined pairs ({margin} margin): median {quartiles[1]:.3f}, "
        f"quartiles {quartiles[0]:.3f} to {quartiles[2]:.3f}"
    )
    if threshold is not None:
        caption += f"; threshold {threshold:g}. Pairs just above the threshold are the least certain translations"
    return save_figure(figure, path, caption + ".")


def load_log_history(source: str | os.PathLike | Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The Trainer's ``log_history``: given as a list, or read from ``trainer_state.json`` (a file, or a folder
    holding it or ``checkpoint-N`` folders, the latest of which is read). An empty list when there is none."""
    if not isinstance(source, (str, os.PathLike)):
        return [dict(entry) for entry in source]
    path = Path(source)
    if path.is_dir():
        candidates = [path / "trainer_state.json"]
        checkpoints = [p for p in path.glob("checkpoint-*") if p.name.split("-")[-1].isdigit()]
        candidates += [
            p / "trainer_state.json" for p in sorted(checkpoints, key=lambda p: -int(p.name.split("-")[-1]))
        ]
        path = next((candidate for candidate in candidates if candidate.is_file()), path / "trainer_state.json")
    if not path.is_file():
        return []
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError) as error:  # RecursionError: JSON nested too deep
        raise ValueError(f"{path}: not a readable trainer_state.json ({error})") from None
    history = state.get("log_history", []) if isinstance(state, dict) else []
    return [dict(entry) for entry in history if isinstance(entry, dict)]


def _series(history: Sequence[Mapping[str, Any]], key: str) -> tuple[list[float], list[float]]:
    points = [(entry["step"], entry[key]) for entry in history if "step" in entry and _finite(entry.get(key))]
    return [float(step) for step, _ in points], [float(value) for _, value in points]


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


# Logged loss parts that do not say "loss" in their name: MuSR's cross-entropy and CrossConST's KL term.
_LOSS_PART_NAMES = {"ce": "cross-entropy (ce)", "kl": "KL consistency (kl)"}
# Approximate characters of legend text that fit across the figure at the legend's font size, and a marker's width.
_LEGEND_CHARACTERS, _LEGEND_MARKER = 96, 8


def _loss_parts(history: Sequence[Mapping[str, Any]]) -> list[str]:
    """The loss parts logged beside the training loss (``loss_distil``, ``alignment_loss``, ``ce``...)."""
    keys: dict[str, None] = {}
    for entry in history:
        if "loss" not in entry:
            continue
        for key, value in entry.items():
            named = ("loss" in key and key not in ("loss", "eval_loss", "train_loss")) or key in _LOSS_PART_NAMES
            if named and not key.startswith("eval_") and _finite(value):
                keys.setdefault(key, None)
    return list(keys)


def _part_label(key: str) -> str:
    if key in _LOSS_PART_NAMES:
        return _LOSS_PART_NAMES[key]
    return key.removeprefix("loss_").removesuffix("_loss").replace("_", " ") + " loss"


def _metric_label(key: str) -> str:
    better = "lower is better" if "xsim" in key else "higher is better"
    return f"eval {key[5:]} (%, {better})"


def _legend(figure: Any, handles: list[Any], labels: list[str]) -> None:
    """Below the axes (inside, it would cover the curves it explains), in as many columns as fit the width: long
    labels in three columns overflow both edges of the figure, and the PNG cuts them off."""
    widest = max(len(label) for label in labels) + _LEGEND_MARKER
    columns = max(1, min(len(labels), _LEGEND_CHARACTERS // widest))
    rows = -(-len(labels) // columns)
    # Each legend row takes height from the axes: the figure grows instead, so the curves keep their size.
    figure.set_figheight(figure.get_figheight() + 0.2 * (rows - 1))
    figure.legend(handles, labels, loc="outside lower center", ncols=columns, fontsize="small")


def training_curve(
    log_history: str | os.PathLike | Sequence[Mapping[str, Any]], path: str | os.PathLike
) -> CardFigure | None:
    """The training loss by step, each logged loss part on its own line, the evaluation loss, and retrieval metrics
    (``eval_*xsim*``, ``eval_*accuracy*``, averages over evaluation sets first) on a second axis in percent; ``None``
    when the history has no loss to plot.

    Loss parts are the keys logged with the training loss whose name holds ``loss`` (``loss_distil``,
    ``loss_self``, ``loss_mask``, ``alignment_loss``...) and MuSR's ``ce`` and ``kl``. With parts, the total is drawn
    thin and grey: when batches of different tasks alternate, the total averages unlike losses and can look flat
    while every part falls. The loss axis is logarithmic when the curves span more than a factor of ten (an MLM
    cross-entropy beside a cosine loss), so that each part's relative fall stays visible.

    ``log_history`` is the Trainer's ``state.log_history`` or a path (see :func:`load_log_history`).
    """
    history = load_log_history(log_history)
    parts = {key: _series(history, key) for key in _loss_parts(history)}
    parts = {key: series for key, series in parts.items() if series[0]}
    losses = {key: _series(history, key) for key in ("loss", "eval_loss")}
    losses = {key: series for key, series in losses.items() if series[0]}
    if not losses and not parts:
        return None
    found = {key for entry in history for key in entry if key.startswith("eval_")}
    found = {key for key in found if "xsim" in key or "accuracy" in key}
    # The averages over evaluation sets (no "/" in the key) before the per-set values: three lines at most.
    metric_keys = sorted(found, key=lambda key: ("/" in key, key))[:3]
    figure = new_figure()
    axes = figure.add_subplot()
    marker = (
        {"marker": "o", "markersize": 3} if max(len(s) for s, _ in [*losses.values(), *parts.values()]) < 30 else {}
    )
    names = {"loss": "total training loss" if parts else "training loss", "eval_loss": "evaluation loss"}
    # Fixed styles: the parts take the colour cycle from its start, so neither total may take a cycle colour then.
    styles = {
        "loss": {"color": "0.55", "linewidth": 1.0, "linestyle": ":"} if parts else {"color": "C0", **marker},
        "eval_loss": {"color": "black", "linestyle": "-.", **marker} if parts else {"color": "C1", **marker},
    }
    for key, (steps, values) in losses.items():
        axes.plot(steps, values, label=names[key], **styles[key])
    for index, (key, (steps, values)) in enumerate(parts.items()):
        axes.plot(steps, values, color=f"C{index}", label=_part_label(key), **marker)
    plotted = [value for _, values in [*losses.values(), *parts.values()] for value in values]
    logarithmic = min(plotted) > 0 and max(plotted) / min(plotted) > 10
    if logarithmic:
        axes.set_yscale("log")
    axes.set_xlabel("optimizer step")
    axes.set_ylabel("loss (log scale)" if logarithmic else "loss")
    axes.set_title("Training curve" + (": each loss part on its own line" if parts else ""))
    handles, labels = axes.get_legend_handles_labels()
    if metric_keys:
        right = axes.twinx()
        for index, key in enumerate(metric_keys):
            steps, values = _series(history, key)
            if not steps:
                continue
            if "accuracy" in key and max(values) <= 1.0:  # a fraction beside xsim in percent: one scale, percent
                values = [100 * value for value in values]
            right.plot(
                steps,
                values,
                linestyle="--",
                marker="s",
                markersize=3,
                color=f"C{index + len(parts) + 2}",
                label=_metric_label(key),
            )
        right.set_ylabel("evaluation metric (%)")
        more_handles, more_labels = right.get_legend_handles_labels()
        handles, labels = handles + more_handles, labels + more_labels
    _legend(figure, handles, labels)
    described = parts or {key: losses[key] for key in ("loss",) if key in losses} or losses
    changes = ", ".join(
        f"{_part_label(key) if key in parts else names[key]} {values[0]:.3f} at step {steps[0]:g} -> "
        f"{values[-1]:.3f} at step {steps[-1]:g}"
        for key, (steps, values) in described.items()
    )
    caption = f"Training curve by optimizer step: {changes}"
    if parts and "loss" in losses:
        caption += "; the dotted grey total mixes the parts, so read the coloured lines for progress"
    if metric_keys:
        caption += "; dashed, right axis: " + ", ".join(key[5:] for key in metric_keys) + " on the evaluation sets"
    return save_figure(figure, path, caption + ".")


def card_figures(
    folder: str | os.PathLike,
    *,
    xsim: Mapping[Any, float] | None = None,
    gold_scores: Sequence[float] | np.ndarray | None = None,
    random_scores: Sequence[float] | np.ndarray | None = None,
    threshold: float | None = None,
    margin: str = "ratio",
    log_history: str | os.PathLike | Sequence[Mapping[str, Any]] | None = None,
) -> list[CardFigure]:
    """The figures of a model card for whatever is known, written into ``folder`` under fixed names
    (``xsim_heatmap.png``, ``margin_distribution.png``, ``training_curve.png``); what is not given is skipped.

    Typical use at the end of a recipe::

        figures = card_figures(tmp, xsim={"wo": 5.9}, log_history=trainer.state.log_history)
        card = render_model_card("laser3", figures=figures, ...)
        save_for_hub(model, tokenizer, output_dir, model_card=card, figures=figures)
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    made: list[CardFigure | None] = []
    if xsim:
        made.append(xsim_heatmap(xsim, folder / "xsim_heatmap.png"))
    if gold_scores is not None and random_scores is not None:
        made.append(
            margin_distribution(
                gold_scores, random_scores, folder / "margin_distribution.png", threshold=threshold, margin=margin
            )
        )
    if log_history is not None:
        made.append(training_curve(log_history, folder / "training_curve.png"))
    return [figure for figure in made if figure is not None]


def xsim_by_series(
    series: Mapping[str, Mapping[str, float | Sequence[float]]],
    path: str | os.PathLike,
    *,
    title: str = "xsim by language (lower is better)",
    ylabel: str = "xsim error rate (%)",
) -> CardFigure:
    """Grouped bars: one group per language, one bar per series (e.g. stage 1, stage 2, a reference encoder).

    Args:
        series: series name -> language -> xsim (%), either one number (one run) or the values of several runs
            (seeds): the bar is then their mean and the error bar their sample standard deviation (ddof=1).
            Languages keep the order of their first appearance; a language a series lacks has no bar there.
        path: the PNG file to write.
    """
    values = {
        name: {lang: np.atleast_1d(np.asarray(v, dtype=np.float64)) for lang, v in by_language.items()}
        for name, by_language in series.items()
        if by_language
    }
    if not values:
        raise ValueError("xsim_by_series needs at least one series with one language")
    languages = list(dict.fromkeys(lang for by_language in values.values() for lang in by_language))
    figure = new_figure(min(10.0, max(5.0, 0.9 * len(languages) * max(1, len(values)) ** 0.5 + 2.5)), 3.8)
    axes = figure.add_subplot()
    width = 0.8 / len(values)
    seeds = max(array.size for by_language in values.values() for array in by_language.values())
    parts = []
    for index, (name, by_language) in enumerate(values.items()):
        positions = [languages.index(lang) + (index - (len(values) - 1) / 2) * width for lang in by_language]
        means = [float(array.mean()) for array in by_language.values()]
        spread = [float(array.std(ddof=1)) if array.size > 1 else 0.0 for array in by_language.values()]
        several = any(array.size > 1 for array in by_language.values())  # no zero-height caps for one run
        axes.bar(positions, means, width, yerr=spread if several else None, capsize=3, label=name)
        mean = float(np.mean(means))
        parts.append(f"{name} {mean:.2f}%")
    axes.set_xticks(range(len(languages)), languages)
    axes.set_ylabel(ylabel)
    axes.set_title(title)
    axes.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))  # outside: bars reach the top
    runs = f"mean over {seeds} runs, error bars one standard deviation; " if seeds > 1 else ""
    caption = f"xsim (margin-based error rate, %, lower is better) per language ({runs}average over languages: "
    return save_figure(figure, path, caption + ", ".join(parts) + ").")
