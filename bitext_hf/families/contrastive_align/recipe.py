"""The reusable steps of ``recipes/align_contrastive.py`` (Wu & Dredze 2020): its arguments, the tokenizer and model,
LoRA's set-up, the Trainer, and the final export (checkpoint, plain encoders, ``eval_results.json``, hub push). The
data (loading, word alignment into examples and held-out sets) is in :mod:`bitext_hf.families.contrastive_align.data`.
"""

# ruff: noqa: RUF009  (the fields' defaults come from arg_field, a dataclasses.field with its help text: no shared state)
from __future__ import annotations

import dataclasses
import functools
import json
import logging
import random
from pathlib import Path
from typing import Any

import torch
from transformers import AutoTokenizer, TrainingArguments

from bitext_hf.data import parse_spec
from bitext_hf.errors import DataValidationError, UsageError
from bitext_hf.families.contrastive_align.aligners import ALIGNERS, EflomalAligner
from bitext_hf.families.contrastive_align.callbacks import OrthogonalizeCallback, ReferenceCallback, check_reference
from bitext_hf.families.contrastive_align.data import AlignmentCollator
from bitext_hf.families.contrastive_align.export import SENTENCE_TRANSFORMERS, export_encoders, model_card
from bitext_hf.families.contrastive_align.losses import AlignmentLoss
from bitext_hf.families.contrastive_align.symmetrize import SYMMETRIZATIONS
from bitext_hf.hub import push_recipe_output, save_for_hub
from bitext_hf.io import atomic_output
from bitext_hf.modeling.contrastive_align import CONTRASTIVE_ALIGN_OBJECTIVES, ContrastiveAlignedEncoder
from bitext_hf.training import BitextTrainer, ModelArguments, apply_peft, export_peft
from bitext_hf.training.args import arg_field
from bitext_hf.training.mlm import random_encoder_config
from bitext_hf.training.peft import ADAPTER_FOLDER
from bitext_hf.training.tokenizer import TokenizerTrainingError, train_or_reuse_tokenizer

logger = logging.getLogger("align_contrastive")

RESULTS_FILE = "eval_results.json"


@dataclasses.dataclass
class ScriptArguments:
    """Data, aligner, encoder and objective (training settings are ``TrainingArguments``, LoRA ``ModelArguments``)."""

    train_pairs: list[str] = arg_field(
        ["de=hub:Helsinki-NLP/opus-100:de-en:train"], "English-centred pair specs.", reads_files=True
    )
    max_pairs: int = arg_field(0, "Read at most this many pairs per spec (0: all; the paper samples 1M).")
    held_out: int = arg_field(0, "Pairs held out per language for word / sentence retrieval (0: no evaluation).")
    held_out_seed: int | None = arg_field(
        None, "Seed of the held-out draw (default: --seed); fix it to evaluate every seed on the same pairs."
    )
    eval_before_training: bool = arg_field(True, "Evaluate the untrained model too (the 'initial' results).")
    objective: str = arg_field("strong", "linear, l2, weak or strong.")
    aligner: str = arg_field("auto", "eflomal (pip install 'bitext-hf[align]'), similarity (fallback), or auto.")
    symmetrization: str = arg_field("grow-diag-final-and", "grow-diag-final-and (paper), intersect or union.")
    alignment_cache: str | None = arg_field(None, "Word-alignment cache folder (default <output_dir>/alignments).")
    encoder: str = arg_field(
        "google-bert/bert-base-multilingual-cased", "Encoder path or hub id, or 'random'.", reads_files=True
    )
    tokenizer: str | None = arg_field(
        None, "Tokenizer path; default: the encoder's, or one trained on the data.", reads_files=True
    )
    max_seq_length: int = arg_field(96, "Tokens per sentence (paper: 96).")
    layer: int | None = arg_field(None, "Hidden state aligned by l2/weak/strong (default: the last).")
    projection_dim: int = arg_field(128, "Projector output width (paper: 128).")
    contrastive_temperature: float = arg_field(0.1, "T of the contrastive objectives (paper: 0.1).")
    gather_across_devices: bool = arg_field(
        True,
        "Several processes, weak and strong objectives: every link of the global batch is a negative, as in one "
        "process given the whole batch (false: each rank's own links).",
    )
    regularization_weight: float | None = arg_field(
        None, "lambda of ||theta - theta_0||^2 (default 1.0; 0 with LoRA)."
    )
    vocab_size: int = arg_field(8000, "Random encoder: tokenizer vocabulary.")
    hidden_size: int = arg_field(256, "Random encoder: width.")
    num_hidden_layers: int = arg_field(4, "Random encoder: layers.")
    num_attention_heads: int = arg_field(4, "Random encoder: attention heads.")
    intermediate_size: int = arg_field(512, "Random encoder: FFN width.")
    dropout: float | None = arg_field(
        None, "Random encoder: dropout of its hidden states and attention (default: XLM-R's 0.1)."
    )

    def __post_init__(self) -> None:
        if not self.train_pairs:
            raise UsageError("--train_pairs is empty: give at least one LANG=SOURCE spec with English on one side")
        if self.objective not in CONTRASTIVE_ALIGN_OBJECTIVES:
            raise UsageError(
                f"--objective {self.objective}: expected one of {', '.join(CONTRASTIVE_ALIGN_OBJECTIVES)}"
            )
        if self.aligner not in ALIGNERS:
            raise UsageError(f"--aligner {self.aligner}: expected one of {', '.join(ALIGNERS)}")
        if self.symmetrization not in SYMMETRIZATIONS:
            raise UsageError(f"--symmetrization {self.symmetrization}: expected one of {', '.join(SYMMETRIZATIONS)}")
        for name in ("max_pairs", "held_out"):
            if getattr(self, name) < 0:
                raise UsageError(f"--{name} must be >= 0, got {getattr(self, name)}")
        if self.max_seq_length < 8:
            raise UsageError(f"--max_seq_length must be >= 8, got {self.max_seq_length}")
        if self.dropout is not None and not 0.0 <= self.dropout < 1.0:
            raise UsageError(f"--dropout must be in [0, 1), got {self.dropout}")
        for spec in self.train_pairs:
            parse_spec(spec)  # syntax only: nothing is read before every argument is known to be good
        if self.aligner == "eflomal":
            EflomalAligner()  # a missing eflomal is a usage error naming the fallback, before any data is read


def check_arguments(
    script_args: ScriptArguments,
    training_args: TrainingArguments,
    model_args: ModelArguments,
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


def export_outputs(
    trained: Any,
    tokenizer: Any,
    output_dir: Path,
    script_args: ScriptArguments,
    training_args: TrainingArguments,
    results: dict[str, Any],
    push: bool,
) -> None:
    """Save the full model (remote code), ``encoder/``, ``adapter/`` with LoRA and ``eval_results.json``; with
    ``push``, upload ``encoder/`` to ``--hub_model_id`` (default: ``<output_dir name>-encoder``)."""
    model = export_peft(trained, output_dir / ADAPTER_FOLDER, merge=True)
    card = functools.partial(
        model_card,
        script_args.objective,
        script_args.encoder,
        results["data"]["languages"],
        results["final"],
        training_data=script_args.train_pairs,
        data_stats=results["data"],
        initial=results.get("initial"),
        steps=results.get("global_step"),
        repo_id=training_args.hub_model_id,
    )
    # The full model, with remote code; a sentence-transformers model too, giving encode()'s vectors.
    save_for_hub(model, tokenizer, output_dir, model_card=card(), sentence_transformers=SENTENCE_TRANSFORMERS)
    export_encoders(model, tokenizer, output_dir / "encoder", model_card=card)
    with atomic_output(output_dir / RESULTS_FILE) as handle:
        json.dump(results, handle, indent=2, sort_keys=True)
        handle.write("\n")
    push_recipe_output(output_dir / "encoder", training_args, f"{output_dir.name}-encoder", push=push)


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
