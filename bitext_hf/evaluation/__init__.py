"""Robust evaluation, usable with every model: the evaluators' base (:class:`RetrievalEvaluator`), a multi-seed
runner (mean +- std per metric), margins of held-out gold pairs against random pairs, zero-shot cross-lingual transfer with a linear head, word-level and sentence-level
retrieval of aligned encoders."""

from __future__ import annotations

from bitext_hf.evaluation.evaluator import RetrievalEvaluator
from bitext_hf.evaluation.margins import gold_and_random_margins, held_out_margins
from bitext_hf.evaluation.retrieval import sentence_retrieval, word_retrieval_accuracy
from bitext_hf.evaluation.seeds import DEFAULT_SEEDS, SeedReport, run_over_seeds, set_all_seeds
from bitext_hf.evaluation.zero_shot import ZeroShotTransfer, zero_shot_transfer

__all__ = [
    "DEFAULT_SEEDS",
    "RetrievalEvaluator",
    "SeedReport",
    "ZeroShotTransfer",
    "gold_and_random_margins",
    "held_out_margins",
    "run_over_seeds",
    "sentence_retrieval",
    "set_all_seeds",
    "word_retrieval_accuracy",
    "zero_shot_transfer",
]
