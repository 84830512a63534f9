"""The ContrastiveAlignedEncoder's held-out evaluation: word-level retrieval accuracy (what the alignment objectives
train) and sentence-level xsim and accuracy per language (:mod:`bitext_hf.evaluation.retrieval`), as the Trainer's
evaluator.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from bitext_hf.evaluation.evaluator import RetrievalEvaluator
from bitext_hf.families.contrastive_align.data import AlignmentEvalSet
from bitext_hf.training.peft import base_model

__all__ = ["AlignmentRetrievalEvaluator"]


class AlignmentRetrievalEvaluator(RetrievalEvaluator):
    """``evaluator(model) -> metrics``: per language ``<lang>/word_accuracy``, ``<lang>/xsim``,
    ``<lang>/sentence_accuracy`` and their means over languages (``word_accuracy``, ``xsim``, ...).

    Primary metric: ``word_accuracy`` (what the alignment objectives train), higher is better. For ``linear`` the
    language's W maps the target side, as in the model's own use.
    """

    def __init__(
        self, tokenizer: Any, eval_sets: Mapping[str, AlignmentEvalSet], max_length: int = 96, *, name: str = ""
    ) -> None:
        super().__init__(primary_metric="word_accuracy", greater_is_better=True, name=name)
        self.tokenizer, self.eval_sets, self.max_length = tokenizer, dict(eval_sets), max_length

    def compute_metrics(self, model: torch.nn.Module) -> dict[str, float]:
        from bitext_hf.evaluation.retrieval import sentence_retrieval, word_retrieval_accuracy

        aligned = base_model(model)
        results: dict[str, float] = {}
        for language, data in self.eval_sets.items():
            target_map = aligned.linear_map(language) if aligned.config.objective == "linear" else None
            words = word_retrieval_accuracy(
                aligned.encoder,
                self.tokenizer,
                data.source_words,
                data.target_words,
                data.links,
                target_map=target_map,
                layer=aligned.config.layer,
                max_length=self.max_length,
            )
            sentences = sentence_retrieval(
                aligned.encoder,
                self.tokenizer,
                data.sources,
                data.targets,
                target_map=target_map,
                max_length=self.max_length,
            )
            results[f"{language}/word_accuracy"] = words["accuracy"]
            results.update({f"{language}/{key}": value for key, value in sentences.items()})
        for metric in ("word_accuracy", "xsim", "sentence_accuracy"):
            values = [results[f"{language}/{metric}"] for language in self.eval_sets]
            if values:
                results[metric] = sum(values) / len(values)
        return results
