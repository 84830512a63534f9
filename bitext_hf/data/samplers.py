"""How many examples each data set contributes: size^alpha weights, temperature sampling, an example budget.

* ``size_alpha_weights``: p_l proportional to n_l ** alpha (alpha = 1: by size, alpha = 0: uniform), the dataset
  weighting of multilingual distillation;
* ``temperature_probabilities``: p_l proportional to (n_l / sum n) ** (1 / T) (T = 1: by size, T -> inf: uniform;
  XLM/mBERT-style temperature sampling, used by MuSR);
* ``budget_counts``: a fixed example budget (OneAligner: 1M) split across data sets by either weighting;
* ``sample_indices`` / ``sample_budget``: the seeded draws that realise those counts.

Both weightings are the same power law (alpha = 1 / T); they are kept apart because papers state one or the other.
Every draw depends only on (seed, data set position), so a run is reproducible and a resumed run sees the same data.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from bitext_hf.data.specs import PairSet
from bitext_hf.errors import UsageError

__all__ = [
    "budget_counts",
    "sample_budget",
    "sample_indices",
    "size_alpha_weights",
    "temperature_probabilities",
]


def _check_sizes(sizes: Sequence[int]) -> np.ndarray:
    values = list(sizes)
    if not values:
        raise UsageError("sizes is empty: give the number of examples of at least one data set")
    for position, size in enumerate(values):
        if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size < 1:
            raise UsageError(
                f"sizes[{position}] is {size!r}: every data set needs at least one example (drop empty ones first)"
            )
    return np.asarray(values, dtype=np.float64)


def _power_probabilities(sizes: np.ndarray, exponent: float) -> np.ndarray:
    # In log space: (n / N) ** (1 / T) underflows to 0 for every data set when T is small.
    logits = exponent * np.log(sizes / sizes.sum())
    weights = np.exp(logits - logits.max())
    return weights / weights.sum()


def size_alpha_weights(sizes: Sequence[int], alpha: float) -> np.ndarray:
    """Probabilities p_l proportional to ``n_l ** alpha`` (float64, summing to 1).

    Args:
        sizes: examples per data set (each >= 1).
        alpha: in [0, 1]; 1 samples by size, 0 uniformly across data sets.
    """
    counts = _check_sizes(sizes)
    if not isinstance(alpha, (int, float)) or not 0.0 <= alpha <= 1.0:
        raise UsageError(f"alpha must be in [0, 1] (1: by size, 0: uniform), got {alpha!r}")
    return _power_probabilities(counts, float(alpha))


def temperature_probabilities(sizes: Sequence[int], temperature: float) -> np.ndarray:
    """Probabilities p_l proportional to ``(n_l / sum n) ** (1 / T)``, normalized (float64, summing to 1).

    Args:
        sizes: examples per data set (each >= 1).
        temperature: T > 0; 1 samples by size, larger T flattens towards uniform (``math.inf``: uniform), T < 1
            sharpens towards the largest data set.
    """
    counts = _check_sizes(sizes)
    if not isinstance(temperature, (int, float)) or math.isnan(temperature) or temperature <= 0:
        raise UsageError(f"temperature must be > 0 (1: by size, larger: flatter, inf: uniform), got {temperature!r}")
    return _power_probabilities(counts, 0.0 if math.isinf(temperature) else 1.0 / temperature)


def _probabilities(sizes: Sequence[int], alpha: float | None, temperature: float | None) -> np.ndarray:
    if alpha is not None and temperature is not None:
        raise UsageError("give alpha or temperature, not both (alpha = 1 / temperature)")
    if temperature is not None:
        return temperature_probabilities(sizes, temperature)
    return size_alpha_weights(sizes, 1.0 if alpha is None else alpha)


def _largest_remainder(shares: np.ndarray, total: int) -> np.ndarray:
    """Integers summing to ``total`` closest to ``shares`` (which sum to ``total``): floors, then one more for the
    largest remainders (ties to the earlier data set, so the result is deterministic)."""
    counts = np.floor(shares).astype(np.int64)
    missing = total - int(counts.sum())
    if missing > 0:
        order = np.lexsort((np.arange(len(shares)), -(shares - counts)))
        counts[order[:missing]] += 1
    return counts


def budget_counts(
    sizes: Sequence[int],
    budget: int,
    *,
    alpha: float | None = None,
    temperature: float | None = None,
    replacement: bool = False,
) -> np.ndarray:
    """Examples to draw from each data set so that they add up to ``budget`` (int64 array).

    The weighting is ``size_alpha_weights(sizes, alpha)`` or ``temperature_probabilities(sizes, temperature)``; with
    neither, alpha = 1 (by size: the same as drawing the budget uniformly from the pooled examples, OneAligner's
    sampling). Without ``replacement`` no data set gives more than it has: the share a small data set cannot fill
    goes to the others in proportion to their weights, and a budget at or above the total takes everything. With
    ``replacement`` the counts follow the weights exactly and may exceed a data set's size (oversampling).
    """
    probabilities = _probabilities(sizes, alpha, temperature)
    if isinstance(budget, bool) or not isinstance(budget, (int, np.integer)) or budget < 1:
        raise UsageError(f"budget must be a positive number of examples, got {budget!r}")
    counts_available = _check_sizes(sizes).astype(np.int64)
    if replacement:
        return _largest_remainder(probabilities * budget, int(budget))
    if budget >= counts_available.sum():
        return counts_available.copy()
    counts = np.zeros(len(counts_available), dtype=np.int64)
    active = np.ones(len(counts_available), dtype=bool)
    remaining = int(budget)
    while True:  # water-filling: at most one pass per data set
        shares = np.zeros(len(counts_available))
        shares[active] = remaining * probabilities[active] / probabilities[active].sum()
        full = active & (shares >= counts_available)
        if not full.any():
            break
        counts[full] = counts_available[full]
        remaining -= int(counts_available[full].sum())
        active &= ~full
    counts[active] = _largest_remainder(shares[active], remaining)
    return counts


def sample_indices(size: int, count: int, seed: int | Sequence[int] = 0, *, replacement: bool = False) -> np.ndarray:
    """``count`` indices into a data set of ``size`` examples, drawn with ``numpy.random.default_rng(seed)``.

    Without ``replacement``, distinct indices (``count <= size``). With it, a count above the size repeats whole
    passes over the data set and draws the rest without repeats, so no example is seen twice more than another.
    """
    if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size < 1:
        raise UsageError(f"size must be a positive number of examples, got {size!r}")
    if isinstance(count, bool) or not isinstance(count, (int, np.integer)) or count < 0:
        raise UsageError(f"count must be a non-negative number of examples, got {count!r}")
    if count > size and not replacement:
        raise UsageError(f"cannot draw {count} distinct examples from {size}; pass replacement=True to oversample")
    generator = np.random.default_rng(seed)
    passes, rest = divmod(int(count), int(size))
    parts = [generator.permutation(size) for _ in range(passes)]
    parts.append(generator.choice(size, rest, replace=False))
    return np.concatenate(parts).astype(np.int64)


def sample_budget(
    pairsets: Sequence[PairSet],
    budget: int,
    *,
    alpha: float | None = None,
    temperature: float | None = None,
    replacement: bool = False,
    seed: int = 0,
) -> list[PairSet]:
    """Draw ``budget_counts(...)`` examples from each PairSet (seeded by ``(seed, position)``); one PairSet each."""
    for pairs in pairsets:
        if not len(pairs):
            raise UsageError(f"{pairs.name}: no pairs to sample from (drop it before sampling)")
    counts = budget_counts(
        [len(pairs) for pairs in pairsets], budget, alpha=alpha, temperature=temperature, replacement=replacement
    )
    return [
        pairs.select(sample_indices(len(pairs), int(count), [seed, position], replacement=replacement))
        for position, (pairs, count) in enumerate(zip(pairsets, counts))
    ]
