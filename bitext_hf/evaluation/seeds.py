"""Repeat an evaluation over several random seeds and report mean and standard deviation per metric.

The explicit-alignment paper's lesson: a single run hides a spread as large as the effects being claimed, so report
mean +- std over seeds picked before the experiment (the paper: 5) and the same seeds for every model.

    >>> report = run_over_seeds(lambda seed: {"accuracy": evaluate(seed)}, seeds=5)
    >>> report.mean["accuracy"], report.std["accuracy"], report.format()["accuracy"]   # "71.2 +- 0.8"

The standard deviation is the sample one (``ddof=1``, as the spread of a population of runs is estimated from a
few of them); with one seed it is 0.
"""

from __future__ import annotations

import itertools
import math
import numbers
import reprlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np

from bitext_hf.errors import UsageError

__all__ = ["DEFAULT_SEEDS", "MAX_SEEDS", "SeedReport", "run_over_seeds", "set_all_seeds"]

# Picked once, before any experiment (the paper's protocol), so every model and task sees the same seeds.
DEFAULT_SEEDS: tuple[int, ...] = (13, 42, 87, 1234, 2024)
# Each seed is a whole evaluation (often a training): a thousand is far past any protocol, and a count such as 10**12
# is refused at once instead of filling the memory with its seeds.
MAX_SEEDS = 1000
MAX_SEED = 2**32 - 1  # numpy's seeds (transformers.set_seed seeds numpy too)


def set_all_seeds(seed: int) -> None:
    """Seed Python, numpy and torch (CPU and CUDA) through ``transformers.set_seed``."""
    from transformers import set_seed

    set_seed(seed)


@dataclass
class SeedReport:
    """The per-seed metrics and their summary."""

    seeds: list[int]
    runs: list[dict[str, float]]
    mean: dict[str, float] = field(default_factory=dict)
    std: dict[str, float] = field(default_factory=dict)

    def format(self, digits: int = 2, scale: float = 1.0) -> dict[str, str]:
        """``{"metric": "mean +- std"}`` with ``digits`` decimals (``scale=100`` for fractions as percents)."""
        return {
            name: f"{self.mean[name] * scale:.{digits}f} +- {self.std[name] * scale:.{digits}f}" for name in self.mean
        }

    def to_dict(self) -> dict[str, object]:
        """JSON-ready: seeds, runs, mean, std."""
        return {"seeds": self.seeds, "runs": self.runs, "mean": self.mean, "std": self.std}


def _shown(value: object) -> str:
    return reprlib.repr(value)  # short at any size or depth: a list of a million seeds is not printed whole


def _is_integer(value: object) -> bool:
    """An integer, numpy's too; a bool is no seed (``seeds=True`` is no count)."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _seed_list(seeds: int | Iterable[int]) -> list[int]:
    """The seeds a run goes over, checked before the first is run: a count from 1 to :data:`MAX_SEEDS`, or at most
    that many distinct integer seeds in numpy's range (an endless iterator is refused, not run)."""
    if _is_integer(seeds):
        count = int(seeds)
        if not 1 <= count <= MAX_SEEDS:
            raise UsageError(f"seeds={count}: run from 1 to {MAX_SEEDS} seeds")
        if count <= len(DEFAULT_SEEDS):
            return list(DEFAULT_SEEDS[:count])
        return list(DEFAULT_SEEDS) + list(range(10_000, 10_000 + count - len(DEFAULT_SEEDS)))
    if isinstance(seeds, str | bytes | Mapping) or not isinstance(seeds, Iterable):
        raise UsageError(
            f"seeds={_shown(seeds)}: give a count of seeds (an integer) or the seeds themselves (a list of integers)"
        )
    shown = _shown(seeds)  # before an iterator is consumed
    chosen = list(itertools.islice(seeds, MAX_SEEDS + 1))
    if len(chosen) > MAX_SEEDS:
        raise UsageError(f"seeds={shown}: more than {MAX_SEEDS} seeds")
    for seed in chosen:
        if not _is_integer(seed) or not 0 <= seed <= MAX_SEED:
            raise UsageError(f"seeds={_shown(chosen)}: seed {seed!r} is not an integer from 0 to 2**32 - 1")
    chosen = [int(seed) for seed in chosen]
    if not chosen or len(set(chosen)) != len(chosen):
        raise UsageError(f"seeds={_shown(chosen)}: give at least one seed and no repeats")
    return chosen


def _metrics(seed: int, reported: object) -> dict[str, float]:
    """What ``evaluate(seed)`` returned, as ``{metric: float}``: a mapping of metric names (str) to finite numbers
    (numpy's and 0-d tensors too; a bool or a text is no number)."""
    if not isinstance(reported, Mapping):
        raise UsageError(f"seed {seed}: evaluate returned {_shown(reported)}, not a mapping {{metric: number}}")
    if not reported:
        raise UsageError(f"seed {seed}: evaluate returned no metric")
    metrics = {}
    for name, value in reported.items():
        if not isinstance(name, str):
            raise UsageError(f"seed {seed}: metric name {_shown(name)} is not a string")
        number = None
        if not isinstance(value, str | bytes | bool):
            try:
                number = float(value)
            except (TypeError, ValueError, OverflowError):
                number = None
        if number is None or not math.isfinite(number):
            raise UsageError(f"seed {seed}: metric {name!r} is {_shown(value)}, not a finite number")
        metrics[name] = number
    return metrics


def run_over_seeds(
    evaluate: Callable[[int], Mapping[str, float]],
    seeds: int | Iterable[int] = 5,
    *,
    seed_everything: bool = True,
) -> SeedReport:
    """Call ``evaluate(seed)`` once per seed and summarize every metric.

    Args:
        evaluate: any evaluation (training included) -> {metric: number}; it receives the seed.
        seeds: a count (the first of :data:`DEFAULT_SEEDS`, then more; at most :data:`MAX_SEEDS`) or the seeds
            themselves (distinct integers from 0 to 2**32 - 1, numpy's range).
        seed_everything: seed Python / numpy / torch before each call (``transformers.set_seed``).

    Raises:
        UsageError: before the first call: an ``evaluate`` that is not callable, no seed, too many, repeated seeds, a
            seed that is no integer in range, a ``seed_everything`` that is not a bool; after a call: a result that is
            not a mapping of metric names to finite numbers, or runs that report different metrics.
    """
    if not callable(evaluate):
        raise UsageError(f"evaluate={_shown(evaluate)}: must be a callable seed -> {{metric: number}}")
    if not isinstance(seed_everything, bool):
        raise UsageError(f"seed_everything={_shown(seed_everything)}: must be True or False")
    chosen = _seed_list(seeds)
    runs: list[dict[str, float]] = []
    for seed in chosen:
        if seed_everything:
            set_all_seeds(seed)
        metrics = _metrics(seed, evaluate(seed))
        if runs and set(metrics) != set(runs[0]):
            raise UsageError(
                f"seed {seed} reported metrics {sorted(metrics)}, seed {chosen[0]} reported {sorted(runs[0])}"
            )
        runs.append(metrics)
    names = list(runs[0])
    values = {name: np.array([run[name] for run in runs], dtype=np.float64) for name in names}
    mean = {name: float(array.mean()) for name, array in values.items()}
    std = {name: float(array.std(ddof=1)) if len(array) > 1 else 0.0 for name, array in values.items()}
    return SeedReport(chosen, runs, mean, std)
