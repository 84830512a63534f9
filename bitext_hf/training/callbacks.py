"""Trainer callbacks of the recipes.

``RetrievalEvalCallback(evaluator)`` is the callback-style way to give :class:`~bitext_hf.training.BitextTrainer`
its retrieval evaluator: ``BitextTrainer(callbacks=[RetrievalEvalCallback(fn)])`` is the same as
``BitextTrainer(retrieval_evaluator=fn)``. The evaluation itself runs inside ``BitextTrainer.evaluate`` (see
``bitext_hf.training.trainer`` for why a bare callback cannot do it: its metrics would miss the logs and the
best-model bookkeeping). A plain ``transformers.Trainer`` given this callback would silently skip retrieval, so the
callback refuses to start training there.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch
from transformers import TrainerCallback

__all__ = ["RetrievalEvalCallback"]


class RetrievalEvalCallback(TrainerCallback):
    """Carries ``evaluator(model) -> {metric: value}`` to a ``BitextTrainer``.

    Args:
        evaluator: called with the model in eval mode under ``torch.no_grad`` at every evaluation; returns a flat
            mapping of metric names to numbers (e.g. ``{"xsim": 3.2, "accuracy": 0.97}``), logged as ``eval_<name>``.
    """

    def __init__(self, evaluator: Callable[[torch.nn.Module], Mapping[str, float]]) -> None:
        if not callable(evaluator):
            raise TypeError("RetrievalEvalCallback needs a callable: evaluator(model) -> dict of metrics")
        self.evaluator = evaluator
        self.attached = False  # set by BitextTrainer when it takes the evaluator over

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if not self.attached:
            raise TypeError(
                "RetrievalEvalCallback only works with bitext_hf.training.BitextTrainer (a plain Trainer would never "
                "run the retrieval evaluation)"
            )
