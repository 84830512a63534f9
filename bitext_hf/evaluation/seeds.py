"""Repeat an evaluation over several random seeds and report mean and standard deviation per metric.

The explicit-alignment paper's lesson: a single run hides a spread as large as the effects being claimed, so report
mean +- std over seeds picked before the experiment (the paper: 5) and the same seeds for every model.

    >>> report = run_over_seeds(lambda seed: {"accuracy": evaluate(seed)}, seeds=5)
    >>> report.mean["accuracy"], report.std["accuracy"], report.format()["accuracy"]   # "71.2 +- 0.8"

The standard deviation is the sample one (``ddof=1``, as the spread of a population of runs is estimated from a
few of them); with one seed it is 0.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np

from bitext_hf.errors import UsageError

__all__ = ["DEFAULT_SEEDS", "SeedReport", "run_over_seeds", "set_all_seeds"]

# Picked once, before any experiment (the paper's protocol), so every model and task sees the same seeds.
DEFAULT_SEEDS: tuple[int, ...] = (13, 42, 87, 1234, 2024)


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


def _seed_list(seeds: int | Iterable[int]) -> list[int]:
    if isinstance(seeds, int):
        if seeds < 1:
            raise UsageError(f"seeds={seeds}: run at least one seed")
        if seeds <= len(DEFAULT_SEEDS):
            return list(DEFAULT_SEEDS[:seeds])
        return list(DEFAULT_SEEDS) + list(range(10_000, 10_000 + seeds - len(DEFAULT_SEEDS)))
    chosen = [int(seed) for seed in seeds]
    if not chosen or len(set(chosen)) != len(chosen):
        raise UsageError(f"seeds={chosen}: give at least one seed and no repeats")
    return chosen


def run_over_seeds(
    evaluate: Callable[[int], Mapping[str, float]],
    seeds: int | Iterable[int] = 5,
    *,
    seed_everything: bool = True,
) -> SeedReport:
    """Call ``evaluate(seed)`` once per seed and summarize every metric.

    Args:
        evaluate: any evaluation (training included) -> {metric: number}; it receives the seed.
        seeds: a count (the first of :data:`DEFAULT_SEEDS`, then more) or the seeds themselves.
        seed_everything: seed Python / numpy / torch before each call (``transformers.set_seed``).

    Raises:
        UsageError: no seed, repeated seeds, runs that report different metrics, or a non-finite value.
    """
    chosen = _seed_list(seeds)
    runs: list[dict[str, float]] = []
    for seed in chosen:
        if seed_everything:
            set_all_seeds(seed)
        metrics = {str(name): float(value) for name, value in dict(evaluate(seed)).items()}
        if runs and set(metrics) != set(runs[0]):
            raise UsageError(
                f"seed {seed} reported metrics {sorted(metrics)}, seed {chosen[0]} reported {sorted(runs[0])}"
            )
        bad = [name for name, value in metrics.items() if not math.isfinite(value)]
        if bad:
            raise UsageError(f"seed {seed}: metric {bad[0]!r} is not a finite number")
        runs.append(metrics)
    names = list(runs[0])
    values = {name: np.array([run[name] for run in runs], dtype=np.float64) for name in names}
    mean = {name: float(array.mean()) for name, array in values.items()}
    std = {name: float(array.std(ddof=1)) if len(array) > 1 else 0.0 for name, array in values.items()}
    return SeedReport(chosen, runs, mean, std)
