"""Hostile calls of ``run_over_seeds`` (bitext_hf.evaluation.seeds), one table: an ``evaluate`` that cannot be called,
seeds of the wrong type or out of numpy's range, repeated, too many or endless, a ``seed_everything`` that is no bool,
and what an ``evaluate`` returns that is no mapping of metric names to finite numbers.

Each row runs the call through tests/hostile_jobs.py's ``check_case`` (in a fresh folder: nothing may appear in it)
and asserts the contract of a library call: a refusal is one of the package's own errors (``UsageError``, exit 2)
naming the value, raised before the first evaluation and the first seeding for anything the arguments show (no
``evaluate`` call, no ``set_all_seeds``), right after the evaluation whose result is refused otherwise; no hang (an
endless iterator of seeds is refused, not run).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable

import numpy as np
import pytest
import torch
from hostile_jobs import TIMEOUT, Case, check_case, params

import bitext_hf.evaluation.seeds as seeds_module
from bitext_hf.errors import EXIT_OK, EXIT_USAGE, BitextError
from bitext_hf.evaluation.seeds import DEFAULT_SEEDS, MAX_SEEDS, run_over_seeds

pytestmark = TIMEOUT


def _accuracy(seed: int) -> dict[str, float]:
    return {"accuracy": 0.5 + seed % 7 / 100}


def _returns(value: object) -> Callable[[int], object]:
    return lambda seed: value


def _call(
    evaluate: object = _accuracy,
    seeds: object = 2,
    *,
    after: int = 0,
    check: Callable[[object, list[int]], bool] | None = None,
    **kwargs,
):
    """A setup: ``run_over_seeds(evaluate, seeds, **kwargs)`` with each call of ``evaluate`` counted and
    ``set_all_seeds`` recorded instead of seeding torch. A refusal must come after ``after`` evaluations (0: before
    the first evaluation and the first seeding); a success must pass ``check(report, seeded)``."""

    def setup(tmp):
        evaluated: list[int] = []
        seeded: list[int] = []

        def counted(seed):
            evaluated.append(seed)
            return evaluate(seed)

        def call():
            real = seeds_module.set_all_seeds
            seeds_module.set_all_seeds = seeded.append
            try:
                report = run_over_seeds(counted if callable(evaluate) else evaluate, seeds, **kwargs)
            except BitextError:
                assert len(evaluated) == after, f"refused after {len(evaluated)} evaluation(s), not {after}"
                assert after or not seeded, f"refused after seeding {seeded}"
                raise
            finally:
                seeds_module.set_all_seeds = real
            assert check is None or check(report, seeded), (report, seeded)
            return report

        return call

    return setup


CASES: dict[str, Case] = {
    # --- what works: counts and seeds of every integer type, the numbers of numpy and torch as metrics
    "a count of 3: the first default seeds, each seeded": Case(
        _call(seeds=3, check=lambda report, seeded: report.seeds == seeded == list(DEFAULT_SEEDS[:3])), EXIT_OK
    ),
    "a count as a numpy integer": Case(
        _call(seeds=np.int64(2), check=lambda report, _: len(report.seeds) == 2), EXIT_OK
    ),
    f"a count of {MAX_SEEDS}, the most": Case(
        _call(seeds=MAX_SEEDS, seed_everything=False, check=lambda report, _: len(set(report.seeds)) == MAX_SEEDS),
        EXIT_OK,
    ),
    "seeds as a numpy array": Case(
        _call(seeds=np.array([7, 8]), check=lambda report, _: report.seeds == [7, 8]), EXIT_OK
    ),
    "seeds from a generator": Case(
        _call(seeds=(seed for seed in (0, 2**32 - 1)), check=lambda report, _: report.seeds == [0, 2**32 - 1]),
        EXIT_OK,
    ),
    "metrics as numpy and torch scalars": Case(
        _call(_returns({"a": np.float32(0.25), "b": torch.tensor(0.5)}), check=lambda r, _: r.mean["b"] == 0.5),
        EXIT_OK,
    ),
    # --- evaluate, seeds and seed_everything: refused before the first evaluation
    "evaluate None": Case(_call(None), EXIT_USAGE, "evaluate=None: must be a callable seed -> {metric: number}"),
    "evaluate a metric's name": Case(_call("accuracy"), EXIT_USAGE, "evaluate='accuracy': must be a callable"),
    "seeds 0": Case(_call(seeds=0), EXIT_USAGE, f"seeds=0: run from 1 to {MAX_SEEDS} seeds"),
    "seeds -3": Case(_call(seeds=-3), EXIT_USAGE, f"seeds=-3: run from 1 to {MAX_SEEDS} seeds"),
    "seeds 10**12": Case(_call(seeds=10**12), EXIT_USAGE, f"seeds=1000000000000: run from 1 to {MAX_SEEDS} seeds"),
    "seeds True": Case(_call(seeds=True), EXIT_USAGE, "seeds=True: give a count of seeds (an integer) or the seeds"),
    "seeds 2.5": Case(_call(seeds=2.5), EXIT_USAGE, "seeds=2.5: give a count of seeds"),
    "seeds NaN": Case(_call(seeds=math.nan), EXIT_USAGE, "seeds=nan: give a count of seeds"),
    "seeds infinite": Case(_call(seeds=math.inf), EXIT_USAGE, "seeds=inf: give a count of seeds"),
    "seeds a string of digits": Case(_call(seeds="13"), EXIT_USAGE, "seeds='13': give a count of seeds"),
    "seeds bytes": Case(_call(seeds=b"13"), EXIT_USAGE, "seeds=b'13': give a count of seeds"),
    "seeds None": Case(_call(seeds=None), EXIT_USAGE, "seeds=None: give a count of seeds"),
    "seeds a dict": Case(_call(seeds={13: 1}), EXIT_USAGE, "seeds={13: 1}: give a count of seeds"),
    "seeds an empty list": Case(_call(seeds=[]), EXIT_USAGE, "seeds=[]: give at least one seed and no repeats"),
    "seeds repeated": Case(_call(seeds=[7, 7]), EXIT_USAGE, "seeds=[7, 7]: give at least one seed and no repeats"),
    "a seed that is a string": Case(_call(seeds=[1, "a"]), EXIT_USAGE, "seed 'a' is not an integer from 0 to 2**32"),
    "a seed 1.5": Case(_call(seeds=[1.5, 2]), EXIT_USAGE, "seed 1.5 is not an integer"),
    "a seed NaN": Case(_call(seeds=[math.nan]), EXIT_USAGE, "seed nan is not an integer"),
    "a seed True": Case(_call(seeds=[True, 2]), EXIT_USAGE, "seed True is not an integer"),
    "a seed -1": Case(_call(seeds=[5, -1]), EXIT_USAGE, "seed -1 is not an integer from 0 to 2**32 - 1"),
    "a seed 2**32": Case(_call(seeds=[2**32]), EXIT_USAGE, "seed 4294967296 is not an integer from 0 to 2**32 - 1"),
    "an endless iterator of seeds": Case(
        _call(seeds=itertools.count()), EXIT_USAGE, f"seeds=count(0): more than {MAX_SEEDS} seeds"
    ),
    f"{MAX_SEEDS + 1} seeds": Case(_call(seeds=list(range(MAX_SEEDS + 1))), EXIT_USAGE, f"more than {MAX_SEEDS}"),
    "seed_everything a string": Case(
        _call(seed_everything="no"), EXIT_USAGE, "seed_everything='no': must be True or False"
    ),
    "seed_everything None": Case(_call(seed_everything=None), EXIT_USAGE, "seed_everything=None: must be True"),
    # --- what evaluate returns: refused right after the evaluation that returned it, naming the seed
    "evaluate returns a number": Case(
        _call(_returns(0.5), after=1), EXIT_USAGE, "seed 13: evaluate returned 0.5, not a mapping {metric: number}"
    ),
    "evaluate returns None": Case(_call(_returns(None), after=1), EXIT_USAGE, "evaluate returned None, not a mapping"),
    "evaluate returns a list of pairs": Case(
        _call(_returns([("accuracy", 0.5)]), after=1), EXIT_USAGE, "returned [('accuracy', 0.5)], not a mapping"
    ),
    "evaluate returns no metric": Case(
        _call(_returns({}), after=1), EXIT_USAGE, "seed 13: evaluate returned no metric"
    ),
    "a metric that is text": Case(
        _call(_returns({"accuracy": "high"}), after=1), EXIT_USAGE, "metric 'accuracy' is 'high', not a finite number"
    ),
    "a metric None": Case(_call(_returns({"accuracy": None}), after=1), EXIT_USAGE, "metric 'accuracy' is None"),
    "a metric True": Case(_call(_returns({"accuracy": True}), after=1), EXIT_USAGE, "metric 'accuracy' is True"),
    "a metric NaN": Case(_call(_returns({"accuracy": math.nan}), after=1), EXIT_USAGE, "'accuracy' is nan, not a"),
    "a metric -inf": Case(_call(_returns({"accuracy": -math.inf}), after=1), EXIT_USAGE, "'accuracy' is -inf, not"),
    "a metric 10**400": Case(_call(_returns({"loss": 10**400}), after=1), EXIT_USAGE, "not a finite number"),
    "a metric that is an array": Case(
        _call(_returns({"accuracy": np.ones(2)}), after=1), EXIT_USAGE, "'accuracy' is array([1., 1.]), not a finite"
    ),
    "a metric named by a number": Case(
        _call(_returns({1: 0.5}), after=1), EXIT_USAGE, "seed 13: metric name 1 is not a string"
    ),
    "runs reporting different metrics": Case(
        _call(lambda seed: {"accuracy" if seed == 13 else "f1": 0.5}, after=2),
        EXIT_USAGE,
        "seed 42 reported metrics ['f1'], seed 13 reported ['accuracy']",
    ),
}  # fmt: skip


@pytest.mark.parametrize("name", params(CASES))
def test_hostile_seeds(name, tmp_path, monkeypatch, capsys):
    check_case(CASES[name], tmp_path, monkeypatch, capsys)
