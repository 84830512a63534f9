"""Teacher-student distillation for LASER3 students (Heffernan et al., 2022): teacher embedding cache, progressive
curriculum, task sampling, MLM masking, losses, step-indexed batches and xsim evaluation;
the pieces ``recipes/distill_wolof.py`` hands to ``BitextTrainer``."""

from __future__ import annotations

from bitext_hf.families.laser3.cache import TeacherEmbeddingCache, cache_key
from bitext_hf.families.laser3.curriculum import (
    curriculum_ratios,
    curriculum_stage,
    prefix_length,
    prefix_texts_and_ids,
)
from bitext_hf.families.laser3.errors import DistillationDataError
from bitext_hf.families.laser3.evaluation import StudentEncoder, XsimEvaluator, evaluate_xsim
from bitext_hf.families.laser3.export import save_student, xsim_rows
from bitext_hf.families.laser3.losses import CosineDistillationLoss
from bitext_hf.families.laser3.masking import SentenceMaskingCollator, pack_blocks
from bitext_hf.families.laser3.sampling import DEFAULT_TASK_WEIGHTS, TASK_SAMPLING, Stream, TaskSampler
from bitext_hf.families.laser3.tasks import DistillationBatches, DistillationLoss, compute_batch_loss

__all__ = [
    "DEFAULT_TASK_WEIGHTS",
    "TASK_SAMPLING",
    "CosineDistillationLoss",
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
    "compute_batch_loss",
    "curriculum_ratios",
    "curriculum_stage",
    "evaluate_xsim",
    "pack_blocks",
    "prefix_length",
    "prefix_texts_and_ids",
    "save_student",
    "xsim_rows",
]
