"""OneAligner's retrieval evaluation: every evaluation set scored with the configured similarity and normalization
(top-1 accuracy in both directions, as the paper reports), LASER's xsim on the raw BERTScore, the paper's Table 1
ablation from the same encodings, and the Trainer's evaluator built on it.

Scoring goes through :mod:`bitext_hf.families.onealigner.scoring` (one implementation of the evaluation-time
similarity, its per-block normalization and top-1 accuracy) and xsim through ``bitext_hf.evaluation.metrics``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch

from bitext_hf.evaluation.evaluator import RetrievalEvaluator
from bitext_hf.evaluation.metrics.functional import xsim_from_similarity
from bitext_hf.families.onealigner.scoring import normalize_blocks, retrieval_accuracy, similarity_matrix
from bitext_hf.training.peft import base_model

__all__ = ["OneAlignerRetrievalEvaluator", "evaluate_sets"]


_ABLATION = (("bertscore", False), ("bertscore", True), ("mean_pool", False), ("mean_pool", True))


@torch.no_grad()
def evaluate_sets(
    model: torch.nn.Module,
    tokenizer: Any,
    eval_sets: Mapping[str, tuple[Sequence[str], Sequence[str]]],
    *,
    ablation: bool = False,
) -> dict[str, float]:
    """Retrieval on every evaluation set: keys ``<set>/<metric>`` and, for the macro average over sets, ``<metric>``.

    ``accuracy`` (and both directions) uses the configured similarity and normalization, per evaluation block of
    ``config.eval_batch_size``; ``xsim`` is LASER's margin error in percent (ratio margin, k=4) on the
    un-normalized similarity; with ``ablation``, ``ablation_<similarity>_<norm|no_norm>_accuracy`` for mean pooling
    and BERTScore, each without and with normalization (the paper's Table 1), from the same encodings.
    """
    model = base_model(model)
    config = model.config
    configured = config.similarity
    results: dict[str, float] = {}
    for name, (sources, targets) in eval_sets.items():
        matrices: dict[tuple[str, bool], torch.Tensor] = {}
        for similarity in ("bertscore", "mean_pool") if ablation else (configured,):
            config.similarity = similarity  # switched for scoring only: the model is restored below
            try:
                raw = similarity_matrix(model, tokenizer, list(sources), list(targets), normalize=False)
            finally:
                config.similarity = configured
            matrices[(similarity, False)] = raw
            matrices[(similarity, True)] = normalize_blocks(raw, config.alpha, config.eval_batch_size)
        scores = matrices[(configured, bool(config.normalization))]
        results.update({f"{name}/{key}": value for key, value in retrieval_accuracy(scores).items()})
        raw = matrices[(configured, False)].numpy()
        results[f"{name}/xsim"] = float(xsim_from_similarity(raw, k=4, margin="ratio")["xsim"])
        if ablation:
            for similarity, normalize in _ABLATION:
                label = f"ablation_{similarity}_{'norm' if normalize else 'no_norm'}_accuracy"
                results[f"{name}/{label}"] = retrieval_accuracy(matrices[(similarity, normalize)])["accuracy"]
    if eval_sets:
        for metric in sorted({key.rsplit("/", 1)[1] for key in results}):
            results[metric] = float(np.mean([results[f"{name}/{metric}"] for name in eval_sets]))
    return results


class OneAlignerRetrievalEvaluator(RetrievalEvaluator):
    """``evaluator(model) -> metrics`` for ``BitextTrainer(retrieval_evaluator=...)``: :func:`evaluate_sets`
    without the ablation (it triples the cost of an evaluation during training). Primary metric: ``accuracy`` (top-1
    retrieval, both directions, macro-averaged over the sets, as the paper reports), higher is better."""

    def __init__(
        self, tokenizer: Any, eval_sets: Mapping[str, tuple[Sequence[str], Sequence[str]]], *, name: str = ""
    ) -> None:
        super().__init__(primary_metric="accuracy", greater_is_better=True, name=name)
        self.tokenizer = tokenizer
        self.eval_sets = dict(eval_sets)

    def compute_metrics(self, model: torch.nn.Module) -> dict[str, float]:
        return evaluate_sets(model, self.tokenizer, self.eval_sets, ablation=False)
