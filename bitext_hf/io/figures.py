"""PNG figures with a caption, drawn with matplotlib's object API on the Agg canvas (no pyplot, no global backend
switch, no display needed) and written atomically: what the card figures (:mod:`bitext_hf.hub.figures`) and the
pair jobs' threshold report (:mod:`bitext_hf.data.pair_files`) draw on.

matplotlib is imported when the first figure is made, not with this module.
"""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bitext_hf.io.outputs import atomic_output

__all__ = [
    "PRIMARY_COLOUR",
    "SECONDARY_COLOUR",
    "CardFigure",
    "histogram_bins",
    "mark_threshold",
    "new_figure",
    "save_figure",
]

DPI = 120
# The first and second series of a figure (gold or kept pairs; random or dropped ones), and the threshold's line.
PRIMARY_COLOUR, SECONDARY_COLOUR, _THRESHOLD_COLOUR = "#1f77b4", "#ff7f0e", "#d62728"


@dataclass(frozen=True)
class CardFigure:
    """A PNG file written for a card, with its caption (Markdown)."""

    path: Path
    caption: str

    def __fspath__(self) -> str:
        return str(self.path)


def _writable_folder(path: Path) -> bool:
    """Whether ``path`` is, or could be made as, a folder this process can write: its nearest existing ancestor is a
    writable folder (what matplotlib tries when it makes its config and cache folders)."""
    while not path.exists() and path.parent != path:
        path = path.parent
    return path.is_dir() and os.access(path, os.W_OK | os.X_OK)


def _quiet_matplotlib_config() -> None:
    """Before matplotlib is first imported: where its default config or cache folder cannot be written (an
    unwritable or missing HOME), give it a fresh temporary one (MPLCONFIGDIR, removed at exit). Matplotlib would
    make one itself, but with two warnings on stderr beside the package's own; a folder the user set is kept."""
    if "matplotlib" in sys.modules or os.environ.get("MPLCONFIGDIR"):
        return
    home = Path(os.path.expanduser("~"))
    folders = [
        Path(os.environ.get("XDG_CONFIG_HOME") or home / ".config") / "matplotlib",
        Path(os.environ.get("XDG_CACHE_HOME") or home / ".cache") / "matplotlib",
    ]
    if all(_writable_folder(folder) for folder in folders):
        return
    folder = tempfile.mkdtemp(prefix="bitext-hf-matplotlib-")
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    os.environ["MPLCONFIGDIR"] = folder


def new_figure(width: float = 6.4, height: float = 4.0):
    """A matplotlib ``Figure`` of ``width`` x ``height`` inches on the Agg canvas, laid out by constraints."""
    _quiet_matplotlib_config()
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width, height), dpi=DPI, layout="constrained")
    FigureCanvasAgg(figure)
    return figure


def save_figure(figure: Any, path: str | os.PathLike, caption: str) -> CardFigure:
    """Write ``figure`` as a PNG to ``path`` (which must end in ``.png``) atomically, never through a link."""
    path = Path(path)
    if path.suffix.lower() != ".png":
        raise ValueError(f"figure path {str(path)!r} must end in .png")
    with atomic_output(path, "wb", follow_symlinks=False) as handle:
        figure.savefig(handle, format="png", dpi=DPI)
    return CardFigure(path, caption)


def histogram_bins(*arrays: np.ndarray, threshold: float | None) -> np.ndarray:
    """40 equal bins over the values of ``arrays`` and the threshold (one unit wide around a single value)."""
    values = np.concatenate([np.asarray(a, dtype=np.float64).ravel() for a in arrays])
    low, high = float(values.min()), float(values.max())
    if threshold is not None:
        low, high = min(low, threshold), max(high, threshold)
    if high - low < 1e-9:
        low, high = low - 0.5, high + 0.5
    return np.linspace(low, high, 41)


def mark_threshold(axes: Any, threshold: float | None) -> None:
    """A dashed red vertical line at ``threshold`` (nothing when None), labelled for the legend."""
    if threshold is not None:
        axes.axvline(
            threshold, color=_THRESHOLD_COLOUR, linestyle="--", linewidth=1.5, label=f"threshold {threshold:g}"
        )
