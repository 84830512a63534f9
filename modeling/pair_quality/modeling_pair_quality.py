"""The light pair-quality classifier: the calibrated probability that a sentence pair is a translation, from the
features of ``features_pair_quality.py`` (the encoder's cosine and margin, and surface checks).

Two hidden layers of ``config.hidden_size`` over the standardised features; ``forward`` gives the raw logit (and, with
``labels``, the binary cross-entropy the recipe trains), ``probabilities`` the calibrated probability
(``sigmoid(a * logit + b)``, Platt scaling fitted on held-out pairs and stored in the config), and
``score(sources, targets, cosines, margins)`` goes from texts to probabilities. Small enough for hundreds of millions
of pairs on a CPU: the features cost more than the network.

This file imports only its configuration, its features, torch and transformers, so that ``save_pretrained`` ships it
as hub remote code (``AutoModel.from_pretrained(path)`` with ``trust_remote_code`` enabled works without bitext_hf).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import nn
from transformers import PreTrainedModel
from transformers.utils import ModelOutput

from .configuration_pair_quality import PairQualityConfig
from .features_pair_quality import FEATURE_NAMES, pair_features

__all__ = ["PairQualityClassifier", "PairQualityInputError", "PairQualityOutput", "PairQualityPreTrainedModel"]


# Copied from modeling.onealigner.functional_onealigner.OneAlignerInputError with OneAligner->PairQuality
class PairQualityInputError(ValueError):
    """Inputs that the PairQuality model cannot use: bad tensors or arguments, no tokenizer to read text with."""


@dataclass
class PairQualityOutput(ModelOutput):
    """
    Args:
        loss (`torch.FloatTensor` of shape `()`, *optional*): binary cross-entropy of the logits, with `labels`.
        logits (`torch.FloatTensor` of shape `(batch,)`): the raw (uncalibrated) logit of each pair.
        probabilities (`torch.FloatTensor` of shape `(batch,)`): the calibrated probability that each pair is a
            translation.
    """

    loss: torch.FloatTensor | None = None
    logits: torch.FloatTensor | None = None
    probabilities: torch.FloatTensor | None = None


class PairQualityPreTrainedModel(PreTrainedModel):
    config_class = PairQualityConfig
    base_model_prefix = "pair_quality"
    main_input_name = "features"

    def _init_weights(self, module: nn.Module) -> None:
        if isinstance(module, nn.Linear):
            nn.init.xavier_uniform_(module.weight)
            nn.init.zeros_(module.bias)


class PairQualityClassifier(PairQualityPreTrainedModel):
    def __init__(self, config: PairQualityConfig) -> None:
        super().__init__(config)
        width = len(config.features)
        self.layers = nn.Sequential(
            nn.Linear(width, config.hidden_size),
            nn.Tanh(),
            nn.Linear(config.hidden_size, config.hidden_size),
            nn.Tanh(),
            nn.Linear(config.hidden_size, 1),
        )
        self.post_init()

    def forward(
        self,
        features: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        return_dict: bool | None = None,
        **kwargs,
    ) -> PairQualityOutput | tuple:
        """``features``: `(batch, len(config.features))` (see ``pair_features``); ``labels``: 1 for a translation,
        0 otherwise (float or int, `(batch,)`)."""
        if features is None or features.dim() != 2 or features.shape[1] != len(self.config.features):
            shape = None if features is None else tuple(features.shape)
            raise PairQualityInputError(
                f"features must be a (batch, {len(self.config.features)}) tensor of {self.config.features}, got {shape}"
            )
        # The standardisation lives in the config (readable, and fitted with the data, not learned): not a weight.
        features = features.to(self.layers[0].weight.dtype)
        mean, scale = features.new_tensor(self.config.feature_mean), features.new_tensor(self.config.feature_scale)
        logits = self.layers((features - mean) / scale).squeeze(-1)
        probabilities = self.calibrate(logits)
        loss = None
        if labels is not None:
            loss = nn.functional.binary_cross_entropy_with_logits(logits.float(), labels.float().reshape(-1))
        return_dict = return_dict if return_dict is not None else self.config.return_dict
        if not return_dict:
            output = (logits, probabilities)
            return (loss, *output) if loss is not None else output
        return PairQualityOutput(loss=loss, logits=logits, probabilities=probabilities)

    def calibrate(self, logits: torch.Tensor) -> torch.Tensor:
        """The calibrated probability of raw logits (the config's Platt scaling)."""
        return torch.sigmoid(self.config.calibration_scale * logits.float() + self.config.calibration_bias)

    @torch.inference_mode()
    def score(
        self,
        sources: Sequence[str],
        targets: Sequence[str],
        cosines: Sequence[float] | torch.Tensor,
        margins: Sequence[float] | torch.Tensor,
        *,
        batch_size: int = 65536,
    ) -> torch.Tensor:
        """The calibrated probability that each pair is a translation, from its texts and the encoder's cosine and
        margin (the encoder and margin the config names): a float32 tensor of ``len(sources)``."""
        if list(self.config.features) != list(FEATURE_NAMES):
            raise PairQualityInputError(
                f"this classifier was trained on the features {self.config.features}; this code computes "
                f"{list(FEATURE_NAMES)}: load it with the code saved beside it (trust_remote_code)"
            )
        cosines = torch.as_tensor(cosines, dtype=torch.float32)
        margins = torch.as_tensor(margins, dtype=torch.float32)
        out = []
        for start in range(0, len(sources), batch_size):
            stop = start + batch_size
            features = pair_features(
                sources[start:stop], targets[start:stop], cosines[start:stop], margins[start:stop]
            )
            out.append(self(features.to(self.device)).probabilities.cpu())
        return torch.cat(out) if out else torch.zeros(0)


# Every save_pretrained ships the three files as remote code (auto_map in config.json).
PairQualityConfig.register_for_auto_class()
PairQualityClassifier.register_for_auto_class("AutoModel")
