"""The light pair-quality classifier: configuration, features and model (self-contained, shippable as hub remote
code)."""

from __future__ import annotations

from bitext_hf.modeling import register_auto_classes

from .configuration_pair_quality import PairQualityConfig
from .features_pair_quality import FEATURE_NAMES, pair_features, text_features
from .modeling_pair_quality import (
    PairQualityClassifier,
    PairQualityInputError,
    PairQualityOutput,
    PairQualityPreTrainedModel,
)

__all__ = [
    "FEATURE_NAMES",
    "PairQualityClassifier",
    "PairQualityConfig",
    "PairQualityInputError",
    "PairQualityOutput",
    "PairQualityPreTrainedModel",
    "pair_features",
    "text_features",
]

# Importing the family registers it (see bitext_hf.modeling.register_auto_classes).
register_auto_classes(only="pair_quality")
