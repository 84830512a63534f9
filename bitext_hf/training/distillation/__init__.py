"""Teacher-student distillation for LASER3 students (Heffernan et al., 2022): teacher embedding cache, progressive
curriculum, task sampling, MLM masking, losses, step-indexed batches and xsim evaluation."""

from __future__ import annotations

from bitext_hf.training.distillation.cache import TeacherEmbeddingCache, cache_key
from bitext_hf.training.distillation.curriculum import (
    curriculum_ratios,
    curriculum_stage,
    prefix_length,
    prefix_texts_and_ids,
)
from bitext_hf.training.distillation.data import (
    Bitext,
    load_bitext,
    load_monolingual,
    parse_source_spec,
    read_lines,
    split_held_out,
)
from bitext_hf.training.distillation.errors import DistillationDataError
from bitext_hf.training.distillation.losses import CosineDistillationLoss
from bitext_hf.training.distillation.masking import mask_tokens
from bitext_hf.training.distillation.sampling import DEFAULT_TASK_WEIGHTS, Stream, TaskSampler
from bitext_hf.training.distillation.trainer import (
    DistillationBatches,
    StudentEncoder,
    compute_batch_loss,
    evaluate_xsim,
)

__all__ = [
    "DEFAULT_TASK_WEIGHTS",
    "Bitext",
    "CosineDistillationLoss",
    "DistillationBatches",
    "DistillationDataError",
    "Stream",
    "StudentEncoder",
    "TaskSampler",
    "TeacherEmbeddingCache",
    "cache_key",
    "compute_batch_loss",
    "curriculum_ratios",
    "curriculum_stage",
    "evaluate_xsim",
    "load_bitext",
    "load_monolingual",
    "mask_tokens",
    "parse_source_spec",
    "prefix_length",
    "prefix_texts_and_ids",
    "read_lines",
    "split_held_out",
]
