"""Evaluation of a student: the student as an `Encoder`, xsim of student(xx) against the teacher's English, and
the ``retrieval_evaluator`` that ``BitextTrainer`` runs every ``eval_steps``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from torch import nn

from bitext_hf.data import PairSet
from bitext_hf.encoders import HFEncoder
from bitext_hf.evaluation.evaluator import RetrievalEvaluator
from bitext_hf.families.laser3.cache import TeacherEmbeddingCache

__all__ = ["StudentEncoder", "XsimEvaluator", "evaluate_xsim"]


class StudentEncoder(HFEncoder):
    """A student (any model whose output has ``sentence_embedding``) with its tokenizer, as an `Encoder`: its own
    pooling and projection, L2-normalised, in length-sorted batches; a student in training stays in training mode."""

    def __init__(
        self, model: nn.Module, tokenizer: Any, max_length: int | None = None, device: str | None = None
    ) -> None:
        # Without max_length, the model's position table is the limit (HFEncoder caps at it).
        super().__init__(model, tokenizer=tokenizer, pooling="model", max_length=max_length or 10**9, device=device)


def evaluate_xsim(
    student: Any, cache: TeacherEmbeddingCache, bitexts: Sequence[PairSet], *, k: int = 4, batch_size: int = 64
) -> dict[str, dict[str, float]]:
    """xsim (LASER's margin-based error rate, %) of student(xx) -> teacher(English) per language, and the
    micro-average over languages under ``"all"``. ``student`` is any `Encoder` (the teacher itself gives the
    zero-shot baseline)."""
    from bitext_hf.evaluation.metrics.functional import xsim, xsim_micro_average

    results: dict[str, dict[str, float]] = {}
    for bitext in bitexts:
        source = np.asarray(student.encode(bitext.src, batch_size=batch_size), dtype=np.float32)
        target = cache.get(bitext.tgt, 1.0)
        scores = xsim(source, target, k=k, margin="ratio", target_texts=bitext.tgt)
        results[bitext.src_lang] = {key: float(value) for key, value in scores.items()}
    if results:
        results["all"] = {key: float(value) for key, value in xsim_micro_average(list(results.values())).items()}
    return results


class XsimEvaluator(RetrievalEvaluator):
    """``evaluator(model) -> {"xsim_<language>": ..., "xsim_all": ...}``: xsim (%) of the student on held-out pairs
    against the teacher's cached English embeddings, for ``BitextTrainer(retrieval_evaluator=...)``.

    Primary metric: ``xsim_all`` (the micro-average over languages), lower is better. ``name``: see
    :class:`~bitext_hf.evaluation.evaluator.RetrievalEvaluator`.
    """

    def __init__(
        self,
        tokenizer: Any,
        cache: TeacherEmbeddingCache,
        bitexts: Sequence[PairSet],
        max_length: int | None = None,
        batch_size: int = 64,
        *,
        name: str = "",
    ) -> None:
        super().__init__(primary_metric="xsim_all", greater_is_better=False, name=name)
        self.tokenizer, self.cache, self.bitexts = tokenizer, cache, list(bitexts)
        self.max_length, self.batch_size = max_length, batch_size

    def details(self, model: nn.Module) -> dict[str, dict[str, float]]:
        """:func:`evaluate_xsim` of ``model``: per language, xsim, errors and n."""
        encoder = StudentEncoder(model, self.tokenizer, max_length=self.max_length)
        return evaluate_xsim(encoder, self.cache, self.bitexts, batch_size=self.batch_size)

    def compute_metrics(self, model: nn.Module) -> dict[str, float]:
        return {f"xsim_{language}": values["xsim"] for language, values in self.details(model).items()}
