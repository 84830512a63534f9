"""Configuration of the light pair-quality classifier: a small MLP over a pair's features (the encoder's cosine and
margin, and surface checks), giving the calibrated probability that the pair is a translation.

This file imports only transformers so that ``save_pretrained`` can ship it as hub remote code.
"""

from __future__ import annotations

import math

from transformers import PretrainedConfig

__all__ = ["PairQualityConfig"]


class PairQualityConfig(PretrainedConfig):
    r"""Configuration of a [`PairQualityClassifier`].

    Args:
        features (`list[str]`): the names of the input columns, in order (`features_pair_quality.FEATURE_NAMES` of
            the code that trained it); a model is only fed the columns it was trained on.
        hidden_size (`int`, defaults to 32): width of the two hidden layers.
        feature_mean (`list[float]`, *optional*): the mean of each feature over the training pairs (zeros: none).
        feature_scale (`list[float]`, *optional*): their standard deviation (ones: none); the inputs are
            standardised with these before the first layer.
        calibration_scale (`float`, defaults to 1.0) and calibration_bias (`float`, defaults to 0.0): Platt scaling
            fitted on held-out pairs: the probability is `sigmoid(calibration_scale * logit + calibration_bias)`.
        encoder (`str`, *optional*): the identity of the sentence encoder whose cosines and margins it was trained
            on (the cosine of another encoder has another scale: a job refuses the mix).
        margin (`str`, defaults to `"ratio"`) and margin_k (`int`, defaults to 4): the margin feature's definition.
        languages (`list[str]`, *optional*): the target languages of its training pairs (documentation only).
    """

    model_type = "bitext_pair_quality"

    def __init__(
        self,
        features: list[str] | None = None,
        hidden_size: int = 32,
        feature_mean: list[float] | None = None,
        feature_scale: list[float] | None = None,
        calibration_scale: float = 1.0,
        calibration_bias: float = 0.0,
        encoder: str | None = None,
        margin: str = "ratio",
        margin_k: int = 4,
        languages: list[str] | None = None,
        **kwargs,
    ) -> None:
        if features is None:
            from .features_pair_quality import FEATURE_NAMES

            features = list(FEATURE_NAMES)
        if not features or not all(isinstance(name, str) for name in features):
            raise ValueError(f"PairQualityConfig.features must be a non-empty list of names, got {features!r}.")
        if not isinstance(hidden_size, int) or isinstance(hidden_size, bool) or hidden_size < 1:
            raise ValueError(f"PairQualityConfig.hidden_size must be a positive integer, got {hidden_size!r}.")
        feature_mean = [0.0] * len(features) if feature_mean is None else [float(value) for value in feature_mean]
        feature_scale = [1.0] * len(features) if feature_scale is None else [float(value) for value in feature_scale]
        for name, values in (("feature_mean", feature_mean), ("feature_scale", feature_scale)):
            if len(values) != len(features) or not all(math.isfinite(value) for value in values):
                raise ValueError(f"PairQualityConfig.{name} must hold {len(features)} finite numbers, got {values!r}.")
        if not all(value > 0 for value in feature_scale):
            raise ValueError(f"PairQualityConfig.feature_scale must be positive, got {feature_scale!r}.")
        for name, value in (("calibration_scale", calibration_scale), ("calibration_bias", calibration_bias)):
            if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
                raise ValueError(f"PairQualityConfig.{name} must be a finite number, got {value!r}.")
        if not isinstance(margin_k, int) or isinstance(margin_k, bool) or margin_k < 1:
            raise ValueError(f"PairQualityConfig.margin_k must be a positive integer, got {margin_k!r}.")
        self.features = list(features)
        self.hidden_size = hidden_size
        self.feature_mean = feature_mean
        self.feature_scale = feature_scale
        self.calibration_scale = float(calibration_scale)
        self.calibration_bias = float(calibration_bias)
        self.encoder = encoder
        self.margin = margin
        self.margin_k = margin_k
        self.languages = list(languages or [])
        super().__init__(**kwargs)
