"""The pair classifier's family folder: the training pieces of its two variants, the light classifier and the
cross-encoder (data: correct pairs and the wrong pairs made from them, with their features; losses; evaluation beside
the encoder's cosine and margin, and the Platt scaling; model cards; the cross-encoder's steps in ``cross_encoder``). The model (``bitext_hf.modeling.pair_quality``) is what ships and knows nothing of
files or encoders: it takes features, or texts with their cosine and margin."""

from __future__ import annotations

from bitext_hf.families.pair_quality.evaluation import (
    evaluate_quality,
    expected_calibration_error,
    fit_calibration,
)
from bitext_hf.families.pair_quality.export import card_figures, model_card, save_outputs
from bitext_hf.families.pair_quality.losses import CrossEncoderLoss, PairQualityLoss

__all__ = [
    "CrossEncoderLoss",
    "PairQualityLoss",
    "card_figures",
    "evaluate_quality",
    "expected_calibration_error",
    "fit_calibration",
    "model_card",
    "save_outputs",
]
