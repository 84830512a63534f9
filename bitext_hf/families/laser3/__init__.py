"""Teacher-student distillation for LASER3 students (Heffernan et al., 2022), in the files every family has:
``arguments`` (``ScriptArguments``, ``StudentArguments``), ``data`` (``load_data``, the step-indexed batches),
``losses`` (``DistillationLoss``), ``evaluation`` (xsim), ``export`` (``save_outputs``, ``model_card``,
``card_figures``) and ``recipe`` (``check_arguments``, teacher, tokenizer, batches, student); and what only this
family needs: the teacher embedding cache, the progressive curriculum, task sampling and MLM masking. The pieces
``recipes/distill_wolof.py`` hands to ``BitextTrainer``."""

from __future__ import annotations

from bitext_hf.families.laser3.cache import TeacherEmbeddingCache, cache_key
from bitext_hf.families.laser3.curriculum import (
    curriculum_ratios,
    curriculum_stage,
    prefix_length,
    prefix_texts_and_ids,
)
from bitext_hf.families.laser3.data import DistillationBatches
from bitext_hf.families.laser3.errors import DistillationDataError
from bitext_hf.families.laser3.evaluation import StudentEncoder, XsimEvaluator, evaluate_xsim
from bitext_hf.families.laser3.export import card_figures, model_card, save_outputs, xsim_rows
from bitext_hf.families.laser3.losses import DistillationLoss, distillation_term
from bitext_hf.families.laser3.masking import (
    MLM_CONTEXT_MARGIN,
    SentenceMaskingCollator,
    mlm_learning_check,
    pack_blocks,
    unigram_entropy,
)
from bitext_hf.families.laser3.sampling import DEFAULT_TASK_WEIGHTS, TASK_SAMPLING, Stream, TaskSampler

__all__ = [
    "DEFAULT_TASK_WEIGHTS",
    "MLM_CONTEXT_MARGIN",
    "TASK_SAMPLING",
    "DistillationBatches",
    "DistillationDataError",
    "DistillationLoss",
    "SentenceMaskingCollator",
    "Stream",
    "StudentEncoder",
    "TaskSampler",
    "TeacherEmbeddingCache",
    "XsimEvaluator",
    "cache_key",
    "card_figures",
    "curriculum_ratios",
    "curriculum_stage",
    "distillation_term",
    "evaluate_xsim",
    "mlm_learning_check",
    "model_card",
    "pack_blocks",
    "prefix_length",
    "prefix_texts_and_ids",
    "save_outputs",
    "unigram_entropy",
    "xsim_rows",
]
