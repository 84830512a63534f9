"""MuSR: encoder-decoder without cross-attention, the sentence embedding its only bridge (musr paper).

``configuration_musr`` and ``modeling_musr`` are self-contained (they ship as remote code): they import only torch,
transformers and each other. Training (label-smoothed cross-entropy, CrossConST, the two stages) lives in
:mod:`bitext_hf.families.musr`.
"""

from __future__ import annotations

from bitext_hf.modeling import register_auto_classes
from bitext_hf.modeling.musr.configuration_musr import MuSRConfig
from bitext_hf.modeling.musr.modeling_musr import (
    MuSREncoderDecoder,
    MuSRInputError,
    MuSROutput,
    MuSRPreTrainedModel,
    label_smoothed_cross_entropy,
)

__all__ = [
    "MuSRConfig",
    "MuSREncoderDecoder",
    "MuSRInputError",
    "MuSROutput",
    "MuSRPreTrainedModel",
    "label_smoothed_cross_entropy",
]

# Importing the family registers it (see bitext_hf.modeling.register_auto_classes), also when this module is
# imported while bitext_hf.modeling itself is still being imported (its own call then runs before the family exists).
register_auto_classes(only="musr")
