"""Robust evaluation, usable with every model (the job of ``bitext-hf eval`` is :mod:`bitext_hf.jobs.evaluate`): the
evaluators' base (:class:`RetrievalEvaluator`), a multi-seed runner (mean +- std per
metric), margins of held-out gold pairs against random pairs, zero-shot cross-lingual transfer with a linear head,
word-level and sentence-level retrieval of aligned encoders.

Each name is imported from its module at its first use (PEP 562, :func:`bitext_hf.lazy_imports.lazy_exports`), so
that importing the package costs no torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from bitext_hf.lazy_imports import lazy_exports

if TYPE_CHECKING:
    from bitext_hf.evaluation.evaluator import RetrievalEvaluator
    from bitext_hf.evaluation.margins import gold_and_random_margins, held_out_margins
    from bitext_hf.evaluation.retrieval import sentence_retrieval, word_retrieval_accuracy
    from bitext_hf.evaluation.seeds import DEFAULT_SEEDS, SeedReport, run_over_seeds, set_all_seeds
    from bitext_hf.evaluation.zero_shot import ZeroShotTransfer, zero_shot_transfer

# Each public name -> the module that defines it.
_SUBMODULE_OF = {
    "RetrievalEvaluator": "evaluator",
    "gold_and_random_margins": "margins",
    "held_out_margins": "margins",
    "sentence_retrieval": "retrieval",
    "word_retrieval_accuracy": "retrieval",
    "DEFAULT_SEEDS": "seeds",
    "SeedReport": "seeds",
    "run_over_seeds": "seeds",
    "set_all_seeds": "seeds",
    "ZeroShotTransfer": "zero_shot",
    "zero_shot_transfer": "zero_shot",
}

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


__getattr__, __dir__ = lazy_exports(__name__, _SUBMODULE_OF, globals())
