"""OneAligner: BERTScore similarity with in-batch normalization over an XLM-R-like encoder (onealigner paper).

``configuration_onealigner`` and ``modeling_onealigner`` are self-contained (remote code); ``retrieval`` adds the
two-stage search that uses :mod:`bitext_hf.mining` and is therefore not shipped with checkpoints.
"""

from __future__ import annotations

from bitext_hf.modeling import register_auto_classes
from bitext_hf.modeling.onealigner.configuration_onealigner import (
    ONEALIGNER_ENCODER_TYPES,
    OneAlignerConfig,
    OneAlignerConfigError,
)
from bitext_hf.modeling.onealigner.modeling_onealigner import (
    OneAlignerInputError,
    OneAlignerModel,
    OneAlignerOutput,
    OneAlignerPreTrainedModel,
    bertscore_matrix,
    bertscore_pairs,
    contrastive_loss,
    normalize_scores,
    pooled_contrastive_loss,
)
from bitext_hf.modeling.onealigner.retrieval import two_stage_retrieve

__all__ = [
    "ONEALIGNER_ENCODER_TYPES",
    "OneAlignerConfig",
    "OneAlignerConfigError",
    "OneAlignerInputError",
    "OneAlignerModel",
    "OneAlignerOutput",
    "OneAlignerPreTrainedModel",
    "bertscore_matrix",
    "bertscore_pairs",
    "contrastive_loss",
    "normalize_scores",
    "pooled_contrastive_loss",
    "two_stage_retrieve",
]

# Importing the family registers it: this completes the registration when the package was being imported at the
# moment transformers was (see bitext_hf.modeling.register_auto_classes).
register_auto_classes(only="onealigner")
