"""Task and dataset sampling: one task per batch, datasets within a task weighted by size ** alpha."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from bitext_hf.data.samplers import size_alpha_weights
from bitext_hf.errors import UsageError
from bitext_hf.families.laser3.errors import DistillationDataError

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
        for stream in streams:
            if stream.task not in task_weights:
                raise UsageError(f"no weight for task {stream.task!r}; known tasks: {sorted(task_weights)}")
            if stream.size < 1:
                raise DistillationDataError(f"dataset {stream.name!r} of task {stream.task!r} has no examples")
        negative = {task: weight for task, weight in task_weights.items() if weight < 0}
        if negative:
            raise UsageError(f"task weights must be non-negative, got {negative}")
        self.streams = list(streams)
        self.seed = seed
        tasks = {stream.task for stream in self.streams}
        task_total = sum(task_weights[task] for task in tasks)
        if task_total <= 0:
            raise UsageError(f"all tasks with data ({sorted(tasks)}) have weight 0")
        self.probabilities = np.zeros(len(self.streams), dtype=np.float64)
        for task in tasks:
            members = [index for index, stream in enumerate(self.streams) if stream.task == task]
            within = size_alpha_weights([self.streams[index].size for index in members], alpha)
            self.probabilities[members] = task_weights[task] / task_total * within
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
