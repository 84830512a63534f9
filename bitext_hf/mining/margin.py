"""Margin functions (Artetxe & Schwenk, 2019): how much a candidate pair stands out from its neighbourhoods.

With a_x = mean cosine of x to its k nearest targets and a_y = mean cosine of y to its k nearest sources:
ratio = cos / ((a_x + a_y) / 2), distance = cos - (a_x + a_y) / 2, absolute = cos.
"""

from __future__ import annotations

from typing import Literal

import numpy as np

from bitext_hf.errors import UsageError

__all__ = ["MARGINS", "Margin", "apply_margin", "neighbourhood_means", "used_k"]

Margin = Literal["ratio", "distance", "absolute"]
MARGINS: tuple[str, ...] = ("ratio", "distance", "absolute")


def check_margin(margin: str) -> None:
    if margin not in MARGINS:
        raise UsageError(f"unknown margin {margin!r}; choose one of {', '.join(MARGINS)}")


def neighbourhood_means(neighbour_sims: np.ndarray) -> np.ndarray:
    """Mean similarity of each row to its k nearest neighbours (the candidate itself included)."""
    return neighbour_sims.mean(axis=1, dtype=np.float64).astype(np.float32)


def apply_margin(cosine: np.ndarray, source_mean: np.ndarray, target_mean: np.ndarray, margin: str) -> np.ndarray:
    """Margin score of pairs with cosine ``cosine`` whose sides have neighbourhood means ``source_mean`` and
    ``target_mean`` (all broadcastable)."""
    check_margin(margin)
    if margin == "absolute":
        return np.asarray(cosine, dtype=np.float32)
    average = (source_mean + target_mean) / 2
    if margin == "ratio":
        # Cosines of real embeddings are positive on average; guard the rare all-negative neighbourhood.
        return (cosine / np.where(average == 0, np.finfo(np.float32).tiny, average)).astype(np.float32)
    return (cosine - average).astype(np.float32)


def used_k(k: int, n_src: int, n_tgt: int) -> int:
    """The k a run reports: the neighbours the margin averaged, ``k`` capped at the corpus (the larger side; a
    sentence of the other side averages over at most that side's size), not a ``k`` no neighbourhood reached."""
    return min(int(k), max(int(n_src), int(n_tgt)))
