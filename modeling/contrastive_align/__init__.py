"""ContrastiveAlignedEncoder: explicit word-level alignment objectives over an mBERT / XLM-R-like encoder.

``configuration_contrastive_align``, ``modeling_contrastive_align`` and ``functional_contrastive_align`` (the training
objectives as pure tensor functions) are self-contained (they ship as remote code): they import only torch,
transformers and each other. Word alignments, the training loss wrapper and the exports live in
:mod:`bitext_hf.families.contrastive_align`.
"""

from __future__ import annotations

from bitext_hf.modeling import register_auto_classes
from bitext_hf.modeling.contrastive_align.configuration_contrastive_align import (
    CONTRASTIVE_ALIGN_OBJECTIVES,
    ContrastiveAlignConfig,
    ContrastiveAlignConfigError,
)
from bitext_hf.modeling.contrastive_align.functional_contrastive_align import (
    ContrastiveAlignInputError,
    l2_alignment_loss,
    linear_mapping_loss,
    mean_pool,
    orthogonalize_,
    parameter_regularization,
    strong_contrastive_loss,
    weak_contrastive_loss,
)
from bitext_hf.modeling.contrastive_align.modeling_contrastive_align import (
    ContrastiveAlignedEncoder,
    ContrastiveAlignOutput,
    ContrastiveAlignPreTrainedModel,
)

__all__ = [
    "CONTRASTIVE_ALIGN_OBJECTIVES",
    "ContrastiveAlignConfig",
    "ContrastiveAlignConfigError",
    "ContrastiveAlignInputError",
    "ContrastiveAlignOutput",
    "ContrastiveAlignPreTrainedModel",
    "ContrastiveAlignedEncoder",
    "l2_alignment_loss",
    "linear_mapping_loss",
    "mean_pool",
    "orthogonalize_",
    "parameter_regularization",
    "strong_contrastive_loss",
    "weak_contrastive_loss",
]

# Importing the family registers it (see bitext_hf.modeling.register_auto_classes).
register_auto_classes(only="contrastive_align")
