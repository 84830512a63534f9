"""The steps of ``recipes/train_pair_quality.py`` between its arguments and its outputs.

* ``ScriptArguments`` (:mod:`~bitext_hf.families.pair_quality.arguments`): data, negatives, encoder and classifier
  settings (training settings are ``TrainingArguments``);
* ``check_arguments``: the checks across argument groups, before any data is read;
* ``load_data`` (:mod:`~bitext_hf.families.pair_quality.data`): correct and wrong pairs with their features;
* ``build_model``: the classifier, its inputs standardised by the training pairs' statistics;
* ``calibrate``: Platt scaling fitted on the calibration pairs (never trained on) and stored in the config;
* ``evaluate_sets`` (:mod:`~bitext_hf.families.pair_quality.evaluation`): the metrics of every held-out set beside
  the encoder's cosine and margin;
* ``save_outputs`` (:mod:`~bitext_hf.families.pair_quality.export`): the model, its card and figures, the results.
"""

from __future__ import annotations

import logging

import numpy as np
import torch
from transformers import TrainingArguments

from bitext_hf.errors import UsageError
from bitext_hf.families.pair_quality.arguments import ScriptArguments
from bitext_hf.families.pair_quality.data import PreparedData
from bitext_hf.families.pair_quality.evaluation import fit_calibration, raw_logits
from bitext_hf.modeling.pair_quality import FEATURE_NAMES, PairQualityClassifier, PairQualityConfig
from bitext_hf.training import ModelArguments

__all__ = ["ScriptArguments", "build_model", "calibrate", "check_arguments"]

logger = logging.getLogger("train_pair_quality")


def check_arguments(
    script_args: ScriptArguments, training_args: TrainingArguments, model_args: ModelArguments
) -> None:
    """The usage errors that need more than one group of arguments, before any data is read."""
    if model_args.use_peft:
        raise UsageError("--use_peft: the pair classifier is a small MLP, trained whole; leave LoRA out")
    if training_args.eval_strategy != "no" and not script_args.eval_pairs:
        raise UsageError("--eval_strategy needs evaluation sets: give --eval_pairs")


def build_model(script_args: ScriptArguments, data: PreparedData, seed: int) -> PairQualityClassifier:
    """The classifier over :data:`FEATURE_NAMES`, standardised by the training pairs' mean and deviation."""
    features = np.asarray(data.train["features"], dtype=np.float64)
    scale = features.std(axis=0)
    config = PairQualityConfig(
        features=list(FEATURE_NAMES),
        hidden_size=script_args.hidden_size,
        feature_mean=features.mean(axis=0).tolist(),
        feature_scale=np.where(scale > 1e-6, scale, 1.0).tolist(),  # a constant column stays as it is
        encoder=data.stats["encoder"],
        margin="ratio",
        margin_k=script_args.margin_k,
        languages=data.stats["train_languages"],
    )
    torch.manual_seed(seed)
    return PairQualityClassifier(config)


def calibrate(model: PairQualityClassifier, data: PreparedData) -> dict[str, float]:
    """Fit the Platt scaling on the calibration pairs and store it in ``model.config``; returns it with the ECE of
    the calibration pairs before and after."""
    from bitext_hf.families.pair_quality.evaluation import expected_calibration_error

    logits = raw_logits(model, data.calibration["features"])
    labels = np.asarray(data.calibration["labels"])
    before = expected_calibration_error(1 / (1 + np.exp(-logits)), labels)
    scale, bias = fit_calibration(logits, labels)
    model.config.calibration_scale, model.config.calibration_bias = scale, bias
    after = expected_calibration_error(1 / (1 + np.exp(-(scale * logits + bias))), labels)
    return {"scale": scale, "bias": bias, "ece_before": before, "ece_after": after}
