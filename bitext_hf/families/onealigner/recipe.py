"""The steps of ``recipes/train_onealigner.py`` between its arguments and its outputs.

The recipe is the entry point (``main``: parse -> build -> train -> export); what it does step by step lives in the
family, so that experiments and tests can call each step on its own:

* ``ScriptArguments`` (:mod:`~bitext_hf.families.onealigner.arguments`): data, encoder and OneAligner settings
  (training settings are ``TrainingArguments``, LoRA ``bitext_hf.training.ModelArguments``);
* ``check_arguments``: the checks across argument groups, before any data is read;
* ``load_data`` (:mod:`~bitext_hf.families.onealigner.data`): load, hold out, de-overlap, sample the example budget,
  tokenize once and drop short examples (``PreparedData``);
* ``tokenizer_factory`` and ``build_model``: the tokenizer (given, the encoder's, or trained on the data) and the
  OneAligner model over a pretrained, random or MLM pre-trained encoder;
* ``save_outputs`` (:mod:`~bitext_hf.families.onealigner.export`): the model, tokenizer, model card with its figures
  and ``eval_results.json``, and the upload of that folder.
"""

from __future__ import annotations

import logging
import random
from typing import Any

import torch
from transformers import AutoTokenizer, TrainingArguments

from bitext_hf.errors import UsageError
from bitext_hf.families.onealigner.arguments import ScriptArguments
from bitext_hf.families.onealigner.data import PreparedData
from bitext_hf.modeling.onealigner import OneAlignerModel
from bitext_hf.training import ModelArguments
from bitext_hf.training.mlm import pretrain_mlm, random_encoder_config
from bitext_hf.training.tokenizer import train_or_reuse_tokenizer

__all__ = ["ScriptArguments", "build_model", "check_arguments", "tokenizer_factory"]

logger = logging.getLogger("train_onealigner")  # the recipe's name: its log lines name the recipe

_MODEL_FIELDS = (
    "similarity",
    "normalization",
    "alpha",
    "softmax_temperature",
    "loss_type",
    "max_seq_length",
    "eval_batch_size",
    "pooled_loss_weight",
)


def check_arguments(
    script_args: ScriptArguments, training_args: TrainingArguments, model_args: ModelArguments
) -> None:
    """The usage errors that need more than one group of arguments, before any data is read (each group checks its
    own fields when parsed)."""
    if training_args.eval_strategy != "no" and not (script_args.eval_pairs or script_args.held_out):
        raise UsageError("--eval_strategy needs evaluation sets: give --eval_pairs or --held_out")


def tokenizer_factory(script_args: ScriptArguments, output_dir: str, resuming: bool) -> Any:
    """texts -> tokenizer: the given or the encoder's, or one trained on a sample of the texts (saved in the output
    folder and reused from there when the run resumes)."""

    def factory(texts: list[str]) -> Any:
        if script_args.tokenizer or script_args.encoder != "random":
            return AutoTokenizer.from_pretrained(script_args.tokenizer or script_args.encoder)
        sample = random.Random(0).sample(texts, min(len(texts), script_args.tokenizer_training_texts))
        return train_or_reuse_tokenizer(
            sample,
            output_dir=output_dir,
            reuse=resuming,
            vocab_size=script_args.vocab_size,
            model_max_length=script_args.max_seq_length,
        )

    return factory


def build_model(script_args: ScriptArguments, tokenizer: Any, data: PreparedData, args: TrainingArguments) -> Any:
    """The OneAligner model over a pretrained encoder, a random one, or a random one after MLM pre-training."""
    kwargs = {name: getattr(script_args, name) for name in _MODEL_FIELDS}
    encoder: Any = script_args.encoder
    if encoder == "random":
        encoder = random_encoder_config(tokenizer, script_args)
        if script_args.dropout is not None:
            encoder.hidden_dropout_prob = encoder.attention_probs_dropout_prob = script_args.dropout
        torch.manual_seed(args.seed)
        if script_args.mlm_steps:
            ids = [example[key] for example in data.train_examples for key in ("src_input_ids", "tgt_input_ids")]
            encoder = str(
                pretrain_mlm(
                    encoder,
                    tokenizer,
                    ids,
                    output_dir=args.output_dir,
                    steps=script_args.mlm_steps,
                    learning_rate=script_args.mlm_learning_rate,
                    batch_size=script_args.mlm_batch_size,
                    training_args=args,
                )
            )
    return OneAlignerModel.from_encoder(encoder, script_args.layer, **kwargs)
