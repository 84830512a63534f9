"""Task and dataset sampling: one task per batch, datasets within a task weighted by size ** alpha."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from bitext_hf.training.distillation.errors import DistillationDataError

__all__ = ["DEFAULT_TASK_WEIGHTS", "Stream", "TaskSampler"]

# The paper's task weights: distillation, self (English to English) and masked language modelling.
DEFAULT_TASK_WEIGHTS: dict[str, float] = {"distil": 1.0, "self": 1.0, "mask": 0.09}


@dataclass(frozen=True)
class Stream:
    """One source of batches: a task applied to one dataset (``name``) of ``size`` examples."""

    task: str
    name: str
    size: int


class TaskSampler:
    """Draw the stream of a batch: P(task) proportional to its weight among the tasks that have data, then
    P(dataset | task) proportional to ``size ** alpha`` (alpha = 1: by size, alpha = 0: uniform).

    Draws depend only on (seed, step), so a run resumed at step s sees the batches an uninterrupted run saw.
    """

    def __init__(
        self,
        streams: Sequence[Stream],
        task_weights: Mapping[str, float] | None = None,
        alpha: float = 0.5,
        seed: int = 0,
    ) -> None:
        task_weights = dict(DEFAULT_TASK_WEIGHTS if task_weights is None else task_weights)
        if not streams:
            raise DistillationDataError("no training data: every task has an empty dataset list")
        if not 0.0 <= alpha <= 1.0:
            raise ValueError(f"dataset sampling alpha must be in [0, 1], got {alpha}")
        for stream in streams:
            if stream.task not in task_weights:
                raise ValueError(f"no weight for task {stream.task!r}; known tasks: {sorted(task_weights)}")
            if stream.size < 1:
                raise DistillationDataError(f"dataset {stream.name!r} of task {stream.task!r} has no examples")
        negative = {task: weight for task, weight in task_weights.items() if weight < 0}
        if negative:
            raise ValueError(f"task weights must be non-negative, got {negative}")
        self.streams = list(streams)
        self.seed = seed
        tasks = {stream.task for stream in self.streams}
        task_total = sum(task_weights[task] for task in tasks)
        if task_total <= 0:
            raise ValueError(f"all tasks with data ({sorted(tasks)}) have weight 0")
        probabilities = []
        for stream in self.streams:
            same_task = [other.size**alpha for other in self.streams if other.task == stream.task]
            probabilities.append(task_weights[stream.task] / task_total * stream.size**alpha / sum(same_task))
        self.probabilities = np.asarray(probabilities, dtype=np.float64)
        self.probabilities /= self.probabilities.sum()

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
