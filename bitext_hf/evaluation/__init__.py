"""Robust evaluation, usable with every model: the evaluators' base (:class:`RetrievalEvaluator`), a multi-seed
runner (mean +- std per metric), zero-shot cross-lingual transfer with a linear head, word-level and sentence-level
retrieval of aligned encoders."""

from __future__ import annotations

from bitext_hf.evaluation.evaluator import RetrievalEvaluator
from bitext_hf.evaluation.retrieval import sentence_retrieval, word_retrieval_accuracy
from bitext_hf.evaluation.seeds import DEFAULT_SEEDS, SeedReport, run_over_seeds, set_all_seeds
from bitext_hf.evaluation.zero_shot import ZeroShotTransfer, zero_shot_transfer

__all__ = [
    "DEFAULT_SEEDS",
    "RetrievalEvaluator",
    "SeedReport",
    "ZeroShotTransfer",
    "run_over_seeds",
    "sentence_retrieval",
    "set_all_seeds",
    "word_retrieval_accuracy",
    "zero_shot_transfer",
]
