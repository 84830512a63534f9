"""``RetrievalEvaluator``: the one base of the families' retrieval evaluators, in sentence-transformers' shape.

An evaluator is called with a model and returns its metrics, ``evaluator(model) -> {"xsim_all": 3.1, ...}``, and
says which of them ranks checkpoints (``primary_metric``) and in which direction (``greater_is_better``), as
sentence-transformers' evaluators do. ``BitextTrainer(retrieval_evaluator=...)`` logs the metrics as
``eval_<key>`` and, unless told otherwise, keeps the checkpoint with the best primary metric.

The base lives in ``evaluation``, with the metrics it reports; the Trainer (``training``, a peer that may not
import ``evaluation``, docs/layout.md) never imports it and reads ``primary_metric`` / ``greater_is_better`` with
``getattr``, so a plain function ``model -> dict`` is an evaluator
too (it only gives up the automatic direction).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping

from torch import nn

__all__ = ["RetrievalEvaluator"]


# Written by hand rather than subclassing sentence-transformers' SentenceEvaluator: its __call__(model, output_path,
# epoch, steps) expects a SentenceTransformer (its model-card hooks read model.model_card_data), while ours receive
# the Trainer's torch module (a family model, or a PeftModel around it); its prefix_name_to_metrics rewrites
# primary_metric at every call; and the class moved between the sentence-transformers versions we support.
class RetrievalEvaluator(ABC):
    """Base of the retrieval evaluators: ``evaluator(model) -> dict[str, float]``.

    Subclasses implement :meth:`compute_metrics` and declare their primary metric through ``__init__``.

    Args:
        primary_metric: the key of :meth:`compute_metrics`'s result that ranks checkpoints (e.g. ``"xsim_all"``).
        greater_is_better: whether a higher primary metric is better (``False`` for an error rate such as xsim).
        name: a name for this evaluation set; when given, every key, ``primary_metric`` included, becomes
            ``<name>_<key>`` (as sentence-transformers names its evaluators' metrics), so that two evaluators of
            one family on different sets log side by side.

    Attributes:
        name, greater_is_better: as given.
        primary_metric: the key of the returned dict that ranks checkpoints, name prefix included.
    """

    def __init__(self, *, primary_metric: str, greater_is_better: bool, name: str = "") -> None:
        self.name = name
        self.greater_is_better = greater_is_better
        self.primary_metric = f"{name}_{primary_metric}" if name else primary_metric

    def __call__(self, model: nn.Module) -> dict[str, float]:
        """The metrics of ``model`` (in eval mode, under ``torch.no_grad`` when the Trainer calls it): every key
        prefixed with ``name`` when one is set, every value a float."""
        return self.prefix_name_to_metrics(self.compute_metrics(model), self.name)

    @abstractmethod
    def compute_metrics(self, model: nn.Module) -> Mapping[str, float]:
        """The metrics of ``model``, keyed without the name prefix."""

    @staticmethod
    def prefix_name_to_metrics(metrics: Mapping[str, float], name: str) -> dict[str, float]:
        """``{key: value}`` -> ``{"<name>_<key>": float(value)}``; keys unchanged when ``name`` is empty."""
        return {(f"{name}_{key}" if name else key): float(value) for key, value in metrics.items()}
