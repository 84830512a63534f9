"""The steps of ``recipes/align_contrastive.py`` (Wu & Dredze 2020) between its arguments
(:mod:`~bitext_hf.families.contrastive_align.arguments`) and its outputs
(:func:`bitext_hf.families.contrastive_align.export.save_outputs`): the checks across argument groups, the tokenizer
and model, LoRA's set-up and the Trainer. The data (loading, word alignment into examples and held-out sets) is in
:mod:`bitext_hf.families.contrastive_align.data`.
"""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path
from typing import Any

import torch
from transformers import AutoTokenizer, TrainingArguments

from bitext_hf.errors import DataValidationError, UsageError
from bitext_hf.families.contrastive_align.arguments import ScriptArguments
from bitext_hf.families.contrastive_align.callbacks import OrthogonalizeCallback, ReferenceCallback, check_reference
from bitext_hf.families.contrastive_align.data import AlignmentCollator
from bitext_hf.families.contrastive_align.losses import AlignmentLoss
from bitext_hf.modeling.contrastive_align import ContrastiveAlignedEncoder
from bitext_hf.training import BitextTrainer, ModelArguments, apply_peft
from bitext_hf.training.mlm import random_encoder_config
from bitext_hf.training.tokenizer import TokenizerTrainingError, train_or_reuse_tokenizer

__all__ = [
    "ScriptArguments",
    "alignment_trainer",
    "build_model",
    "build_tokenizer",
    "check_arguments",
    "prepare_peft",
    "regularization_weight",
]


def check_arguments(
    script_args: ScriptArguments,
    training_args: TrainingArguments,
    model_args: ModelArguments,
    *,
    resume: str | None = None,
) -> None:
    """The usage errors that need more than one group of arguments; the checkpoint to ``resume`` from must carry
    theta_0 when the run regularizes (:func:`check_reference`)."""
    if model_args.use_peft and script_args.objective == "linear":
        raise UsageError("--use_peft with --objective linear: the linear objective keeps the encoder frozen")
    if training_args.eval_strategy != "no" and not script_args.held_out:
        raise UsageError("--eval_strategy needs held-out pairs: give --held_out N")
    regularized = script_args.objective != "linear" and regularization_weight(script_args, model_args.use_peft) > 0
    check_reference(resume, regularized)


def regularization_weight(script_args: ScriptArguments, lora: bool) -> float:
    """lambda: ``--regularization_weight``, by default 1.0 (paper), or 0 with LoRA (the adapters are the bound)."""
    weight = script_args.regularization_weight
    return (0.0 if lora else 1.0) if weight is None else float(weight)


def build_tokenizer(script_args: ScriptArguments, texts: list[str], output_dir: Path, resuming: bool) -> Any:
    """The given or the encoder's tokenizer, or (random encoder) one trained on a sample of the data."""
    if script_args.tokenizer or script_args.encoder != "random":
        return AutoTokenizer.from_pretrained(script_args.tokenizer or script_args.encoder)
    sample = random.Random(0).sample(texts, min(len(texts), 100_000))
    try:
        return train_or_reuse_tokenizer(
            sample,
            output_dir=str(output_dir),
            reuse=resuming,
            vocab_size=script_args.vocab_size,
            model_max_length=script_args.max_seq_length,
        )
    except TokenizerTrainingError as error:  # too little text for the vocabulary: a data problem, one line
        raise DataValidationError(f"{', '.join(script_args.train_pairs)}: {error}") from None


def build_model(script_args: ScriptArguments, tokenizer: Any, languages: list[str], lora: bool, seed: int) -> Any:
    """The ContrastiveAlignedEncoder over a pretrained encoder or a random XLM-R-like one."""
    encoder: Any = script_args.encoder
    if encoder == "random":
        torch.manual_seed(seed)
        encoder = random_encoder_config(tokenizer, script_args)
        if script_args.dropout is not None:
            encoder.hidden_dropout_prob = encoder.attention_probs_dropout_prob = script_args.dropout
    weight = regularization_weight(script_args, lora)
    return ContrastiveAlignedEncoder.from_encoder(
        encoder,
        objective=script_args.objective,
        languages=languages,
        layer=script_args.layer,
        projection_dim=script_args.projection_dim,
        contrastive_temperature=script_args.contrastive_temperature,
        regularization_weight=weight,
        max_seq_length=script_args.max_seq_length,
    )


def prepare_peft(model: Any, model_args: ModelArguments) -> Any:
    """The model with LoRA adapters when ``--use_peft``; the new projector then trains in full, not through LoRA,
    as one of peft's ``modules_to_save``: saved with the adapter, so that a resumed run goes on from the trained
    projector (a projector that only required gradients was missing from the checkpoints and started afresh)."""
    if model_args.use_peft and model.projector is not None:
        saved = list(model_args.lora_modules_to_save or [])
        saved += [] if "projector" in saved else ["projector"]
        model_args = dataclasses.replace(model_args, lora_modules_to_save=saved)
    return apply_peft(model, model_args)


def alignment_trainer(
    model: Any,
    tokenizer: Any,
    examples: Any,
    evaluator: Any,
    script_args: ScriptArguments,
    training_args: TrainingArguments,
    resume: str | None = None,
) -> BitextTrainer:
    """The Trainer of one run: the alignment loss and collator, the held-out ``evaluator`` (or None), for the
    ``linear`` objective the callback that keeps each language's mapping orthogonal, for the others the one that
    saves theta_0 in every checkpoint and sets it back from ``resume`` (the checkpoint the run resumes from)."""
    linear = script_args.objective == "linear"
    return BitextTrainer(
        model,
        training_args,
        loss_fn=AlignmentLoss(gather_across_devices=script_args.gather_across_devices),
        train_dataset=examples,
        data_collator=AlignmentCollator(tokenizer.pad_token_id),
        retrieval_evaluator=evaluator,
        callbacks=[OrthogonalizeCallback() if linear else ReferenceCallback(resume)],
    )
