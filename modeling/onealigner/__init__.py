"""OneAligner: BERTScore similarity with in-batch normalization over an XLM-R-like encoder (onealigner paper).

``configuration_onealigner``, ``modeling_onealigner`` and ``functional_onealigner`` (the pure tensor functions) are
self-contained (they ship as remote code): they import only torch, transformers and each other. Text-level scoring and the two-stage retrieval over corpora use the model's
public methods from :mod:`bitext_hf.families.onealigner`.
"""

from __future__ import annotations

from bitext_hf.modeling import register_auto_classes
from bitext_hf.modeling.onealigner.configuration_onealigner import (
    ONEALIGNER_ENCODER_TYPES,
    OneAlignerConfig,
    OneAlignerConfigError,
)
from bitext_hf.modeling.onealigner.modeling_onealigner import (
    OneAlignerFeatures,
    OneAlignerInputError,
    OneAlignerModel,
    OneAlignerOutput,
    OneAlignerPreTrainedModel,
    bertscore_candidates,
    bertscore_matrix,
    bertscore_pairs,
    contrastive_loss,
    mean_pool,
    normalize_scores,
    pooled_contrastive_loss,
)

__all__ = [
    "ONEALIGNER_ENCODER_TYPES",
    "OneAlignerConfig",
    "OneAlignerConfigError",
    "OneAlignerFeatures",
    "OneAlignerInputError",
    "OneAlignerModel",
    "OneAlignerOutput",
    "OneAlignerPreTrainedModel",
    "bertscore_candidates",
    "bertscore_matrix",
    "bertscore_pairs",
    "contrastive_loss",
    "mean_pool",
    "normalize_scores",
    "pooled_contrastive_loss",
]

# Importing the family registers it (see bitext_hf.modeling.register_auto_classes), also when this module is
# imported while bitext_hf.modeling itself is still being imported (its own call then runs before the family exists).
register_auto_classes(only="onealigner")
