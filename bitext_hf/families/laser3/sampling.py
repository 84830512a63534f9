"""Which dataset feeds each batch: one task per batch, and the task weights' two readings.

* ``size_alpha`` (the default, fairseq's ``laser_distillation``, the paper's code): batches are drawn across all
  datasets by size, with a joint weighting alpha over the student-side languages (a language's datasets of every
  task together: MLM text and bitexts of Wolof are one group, the English of the self task another), and within a
  language by size; a task's weight multiplies its loss (``--lambda-mask 0.09``). A task of weight 0 draws no batch.
* ``probability`` (this package's earlier reading): the weights are the probabilities of drawing each task, datasets
  within a task by ``size ** alpha``, and every loss counts once.

fairseq's ``--joint-weighting-alpha a`` is an upsampling exponent: each language is repeated (f_max / f_l) ** a times
(f: its share of the data), so a language's share of the batches is proportional to its size ** (1 - a). Here alpha
is the exponent of the size itself (``bitext_hf.data.samplers.size_alpha_weights``): fairseq's README command
(a = 0.09) is alpha = 0.91.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from bitext_hf.data.samplers import size_alpha_weights
from bitext_hf.errors import UsageError
from bitext_hf.families.laser3.errors import DistillationDataError

__all__ = ["DEFAULT_ALPHA", "DEFAULT_TASK_WEIGHTS", "TASK_SAMPLING", "Stream", "TaskSampler"]

# fairseq's laser_distillation README: --lambda-distil 1.0 --lambda-self 1.0 --lambda-mask 0.09, loss multipliers
# (with task_sampling="probability", the probabilities of drawing each task instead).
DEFAULT_TASK_WEIGHTS: dict[str, float] = {"distil": 1.0, "self": 1.0, "mask": 0.09}

# The two readings of the task weights (see the module docstring); the first is the default.
TASK_SAMPLING: tuple[str, ...] = ("size_alpha", "probability")

# Per reading, the default alpha: fairseq's --joint-weighting-alpha 0.09 for size_alpha; this package's earlier
# within-task default for probability.
DEFAULT_ALPHA: dict[str, float] = {"size_alpha": 0.91, "probability": 0.5}


@dataclass(frozen=True)
class Stream:
    """One source of batches: a task applied to one dataset (``name``, the student-side language) of ``size``
    examples (MLM: blocks of text)."""

    task: str
    name: str
    size: int


class TaskSampler:
    """Draw the stream of a batch.

    ``task_sampling="size_alpha"``: P(language) proportional to ``size ** alpha`` over the languages' total sizes (all
    tasks of a language together), then P(stream | language) proportional to its size; streams of a task of weight 0
    are left out. ``task_sampling="probability"``: P(task) proportional to its weight among the tasks that have data,
    then P(stream | task) proportional to ``size ** alpha``. alpha = 1: by size, alpha = 0: uniform; None: the
    reading's default (:data:`DEFAULT_ALPHA`).

    Draws depend only on (seed, step), so a run resumed at step s sees the batches an uninterrupted run saw.
    """

    def __init__(
        self,
        streams: Sequence[Stream],
        task_weights: Mapping[str, float] | None = None,
        alpha: float | None = None,
        seed: int = 0,
        task_sampling: str = "size_alpha",
    ) -> None:
        if task_sampling not in TASK_SAMPLING:
            raise UsageError(f"task_sampling must be one of {list(TASK_SAMPLING)}, got {task_sampling!r}")
        task_weights = dict(DEFAULT_TASK_WEIGHTS if task_weights is None else task_weights)
        if not streams:
            raise DistillationDataError("no training data: every task has an empty dataset list")
        for stream in streams:
            if stream.task not in task_weights:
                raise UsageError(f"no weight for task {stream.task!r}; known tasks: {sorted(task_weights)}")
            if stream.size < 1:
                raise DistillationDataError(f"dataset {stream.name!r} of task {stream.task!r} has no examples")
        negative = {task: weight for task, weight in task_weights.items() if weight < 0}
        if negative:
            raise UsageError(f"task weights must be non-negative, got {negative}")
        tasks = sorted({stream.task for stream in streams})
        if sum(task_weights[task] for task in tasks) <= 0:
            raise UsageError(f"all tasks with data ({tasks}) have weight 0")
        self.task_sampling = task_sampling
        self.alpha = DEFAULT_ALPHA[task_sampling] if alpha is None else alpha
        self.seed = seed
        if task_sampling == "size_alpha":
            # A weight of 0 multiplies the loss by 0: such batches would be steps without a gradient.
            self.streams = [stream for stream in streams if task_weights[stream.task] > 0]
            self.probabilities = _by_language(self.streams, self.alpha)
            self.loss_weights = {task: float(weight) for task, weight in task_weights.items()}
        else:
            self.streams = list(streams)
            self.probabilities = _by_task(self.streams, task_weights, self.alpha)
            self.loss_weights = {task: 1.0 for task in task_weights}

    def task_probabilities(self) -> dict[str, float]:
        """The marginal probability of each task."""
        marginal: dict[str, float] = {}
        for stream, probability in zip(self.streams, self.probabilities):
            marginal[stream.task] = marginal.get(stream.task, 0.0) + float(probability)
        return marginal

    def sample(self, step: int) -> Stream:
        """The stream that feeds the batch of ``step`` (a generator seeded by (seed, step): any step on its own)."""
        generator = np.random.default_rng([self.seed, step])
        return self.streams[int(generator.choice(len(self.streams), p=self.probabilities))]


def _by_language(streams: Sequence[Stream], alpha: float) -> np.ndarray:
    """fairseq's joint weighting: languages by total size ** alpha, the streams of a language by size."""
    languages = list(dict.fromkeys(stream.name for stream in streams))
    totals = {language: sum(s.size for s in streams if s.name == language) for language in languages}
    weights = dict(zip(languages, size_alpha_weights([totals[language] for language in languages], alpha)))
    probabilities = np.array([weights[s.name] * s.size / totals[s.name] for s in streams], dtype=np.float64)
    return probabilities / probabilities.sum()


def _by_task(streams: Sequence[Stream], task_weights: Mapping[str, float], alpha: float) -> np.ndarray:
    """Tasks by weight, the streams of a task by size ** alpha."""
    # Sorted: a set of strings iterates in the order of PYTHONHASHSEED, and float sums depend on their order.
    tasks = sorted({stream.task for stream in streams})
    task_total = sum(task_weights[task] for task in tasks)
    probabilities = np.zeros(len(streams), dtype=np.float64)
    for task in tasks:
        members = [index for index, stream in enumerate(streams) if stream.task == task]
        within = size_alpha_weights([streams[index].size for index in members], alpha)
        probabilities[members] = task_weights[task] / task_total * within
    return probabilities / probabilities.sum()
