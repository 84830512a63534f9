"""The steps of ``recipes/train_pair_quality_cross_encoder.py`` between its arguments and its outputs: the
cross-encoder variant of the pair classifier, a Hugging Face encoder base with a one-logit sequence-classification
head that reads the two texts together (:mod:`bitext_hf.mining.quality_cross_encoder`).

* ``check_cross_encoder_arguments``: the checks across argument groups, before any data is read;
* ``build_cross_encoder``: the base's ``AutoModelForSequenceClassification`` (one label) and tokenizer, loaded with
  the encoders' checks (safetensors, no remote code), its config marked as a pair classifier;
* ``tokenized_pairs``: the prepared pairs (the same as the light classifier's) as token ids and labels;
* ``calibrate_cross_encoder``: Platt scaling fitted on the calibration pairs and folded into the head;
* ``cross_encoder_probabilities``: its probabilities of a prepared set, for ``evaluate_sets``.
"""

from __future__ import annotations

import logging
from types import SimpleNamespace
from typing import Any

import numpy as np
from transformers import TrainingArguments

from bitext_hf.errors import UsageError
from bitext_hf.families.pair_quality.arguments import CrossEncoderArguments
from bitext_hf.families.pair_quality.data import PreparedData
from bitext_hf.families.pair_quality.evaluation import Probabilities, expected_calibration_error, fit_calibration
from bitext_hf.mining.quality_cross_encoder import (
    CROSS_ENCODER_MARKER,
    CROSS_ENCODER_VARIANT,
    SIGMOID,
    cross_encoder_logits,
    fold_calibration,
)
from bitext_hf.training import ModelArguments

__all__ = [
    "build_cross_encoder",
    "calibrate_cross_encoder",
    "check_cross_encoder_arguments",
    "cross_encoder_probabilities",
    "tokenized_pairs",
]

logger = logging.getLogger("train_pair_quality_cross_encoder")


def check_cross_encoder_arguments(
    script_args: CrossEncoderArguments, training_args: TrainingArguments, model_args: ModelArguments
) -> None:
    """The usage errors that need more than one group of arguments, before any data is read."""
    if model_args.use_peft:
        raise UsageError("--use_peft: the cross-encoder is trained whole here (its head is new); leave LoRA out")
    if training_args.eval_strategy != "no":
        raise UsageError("--eval_strategy: the held-out sets are measured after training and calibration; use 'no'")


# The base "random": a tiny XLM-R-like encoder over a tokenizer trained on the pairs, for smoke runs and tests on a
# machine without a pretrained base (it learns from what survives its own vocabulary, not from pre-training).
RANDOM_BASE = "random"
RANDOM_SIZES = {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 128}
RANDOM_VOCABULARY = 4000


def build_cross_encoder(
    script_args: CrossEncoderArguments, data: PreparedData, training_args: TrainingArguments, *, resuming: bool
) -> tuple[Any, Any]:
    """(model, tokenizer): ``base_model`` with a new one-logit head (its initialisation drawn from the seed), the
    tokenizer truncating at ``max_length`` (sentence-transformers' ``CrossEncoder`` reads the same limit back), and the
    config marked as a pair classifier (what ``load_classifier`` recognises) with what it was trained on. A pretrained
    base is loaded with the encoders' checks (safetensors, no remote code); ``random`` is built here."""
    import torch

    labels = {"num_labels": 1, "id2label": {0: "translation"}, "label2id": {"translation": 0}}
    if script_args.base_model == RANDOM_BASE:
        model, tokenizer = _random_base(script_args, data, training_args, resuming, labels)
    else:
        from bitext_hf.encoders.sources import load_source, resolve_model

        source = resolve_model(script_args.base_model)

        def build() -> tuple[Any, Any]:
            from transformers import AutoModelForSequenceClassification, AutoTokenizer

            torch.manual_seed(training_args.seed)
            model = AutoModelForSequenceClassification.from_pretrained(source.source, use_safetensors=True, **labels)
            return model, AutoTokenizer.from_pretrained(source.source)

        model, tokenizer = load_source(source, build)
    tokenizer.model_max_length = script_args.max_length
    config = model.config
    setattr(config, CROSS_ENCODER_MARKER, CROSS_ENCODER_VARIANT)
    config.pair_max_length = script_args.max_length
    config.pair_quality_base = script_args.base_model
    config.pair_quality_languages = list(data.stats["train_languages"])
    config.sentence_transformers = {"activation_fn": SIGMOID}
    return model, tokenizer


def _random_base(
    script_args: CrossEncoderArguments,
    data: PreparedData,
    training_args: TrainingArguments,
    resuming: bool,
    labels: dict[str, Any],
) -> tuple[Any, Any]:
    import torch
    from transformers import XLMRobertaForSequenceClassification

    from bitext_hf.training.mlm import random_encoder_config
    from bitext_hf.training.tokenizer import train_or_reuse_tokenizer

    texts = list(dict.fromkeys([*data.train["source"], *data.train["target"]]))
    tokenizer = train_or_reuse_tokenizer(
        texts,
        output_dir=training_args.output_dir,
        reuse=resuming,
        vocab_size=RANDOM_VOCABULARY,
        model_max_length=script_args.max_length,
        min_vocab_fraction=0.0,  # up to RANDOM_VOCABULARY pieces: what the pairs support, however few they are
    )
    sizes = SimpleNamespace(**RANDOM_SIZES, max_seq_length=script_args.max_length)
    config = random_encoder_config(tokenizer, sizes)
    for name, value in labels.items():
        setattr(config, name, value)
    torch.manual_seed(training_args.seed)
    return XLMRobertaForSequenceClassification(config), tokenizer


def tokenized_pairs(dataset: Any, tokenizer: Any, max_length: int) -> Any:
    """``dataset``'s ``source``/``target`` pairs as the tokenizer's inputs (unpadded: the collator pads each batch)
    and ``labels``, nothing else (every column is the model's or the loss's)."""

    def tokenize(batch: dict[str, list]) -> dict[str, list]:
        return dict(tokenizer(batch["source"], batch["target"], truncation=True, max_length=max_length))

    columns = [name for name in dataset.column_names if name != "labels"]
    return dataset.map(tokenize, batched=True, remove_columns=columns, desc="tokenizing pairs")


def _logits(model: Any, tokenizer: Any, dataset: Any, script_args: CrossEncoderArguments) -> np.ndarray:
    return cross_encoder_logits(
        model,
        tokenizer,
        list(dataset["source"]),
        list(dataset["target"]),
        max_length=script_args.max_length,
        batch_size=script_args.score_batch_size,
    )


def calibrate_cross_encoder(
    model: Any, tokenizer: Any, data: PreparedData, script_args: CrossEncoderArguments
) -> dict[str, float]:
    """Fit the Platt scaling on the calibration pairs and fold it into the head (``sigmoid(logit)`` is then the
    calibrated probability); returns it with the ECE of the calibration pairs before and after."""
    logits = _logits(model, tokenizer, data.calibration, script_args)
    labels = np.asarray(data.calibration["labels"])
    before = expected_calibration_error(1 / (1 + np.exp(-logits)), labels)
    scale, bias = fit_calibration(logits, labels)
    fold_calibration(model, scale, bias)
    calibrated = scale * logits + bias
    after = expected_calibration_error(1 / (1 + np.exp(-calibrated)), labels)
    # The fold checked on a few pairs (a head whose last linear layer is not the logit's would fail here, not later).
    sample = data.calibration.select(range(min(64, len(data.calibration))))
    folded = _logits(model, tokenizer, sample, script_args)
    if not np.allclose(folded, calibrated[: len(folded)], rtol=1e-3, atol=1e-3):
        raise RuntimeError(f"{type(model).__name__}: the calibration folded into its head does not give its logits")
    return {"scale": scale, "bias": bias, "ece_before": before, "ece_after": after}


def cross_encoder_probabilities(model: Any, tokenizer: Any, script_args: CrossEncoderArguments) -> Probabilities:
    """The (folded-calibration) cross-encoder's probabilities of a dataset's pairs."""
    return lambda dataset: 1 / (1 + np.exp(-_logits(model, tokenizer, dataset, script_args).astype(np.float64)))
