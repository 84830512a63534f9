"""Shared training infrastructure for the recipes: argument parsing, the Trainer subclass, PEFT, tokenizer training.

Family-specific pieces live in :mod:`bitext_hf.families` (one folder per family); the evaluators' base,
:class:`~bitext_hf.evaluation.RetrievalEvaluator`, in :mod:`bitext_hf.evaluation`.
"""

from __future__ import annotations

from bitext_hf.training.args import ConfigFileError, load_yaml_config, parse_args, run_recipe
from bitext_hf.training.callbacks import RetrievalEvalCallback
from bitext_hf.training.peft import ModelArguments, apply_peft, export_peft
from bitext_hf.training.tokenizer import (
    SPECIAL_TOKENS,
    TokenizerTrainingError,
    train_or_reuse_tokenizer,
    train_tokenizer,
)
from bitext_hf.training.trainer import BitextTrainer, resume_checkpoint

__all__ = [
    "SPECIAL_TOKENS",
    "BitextTrainer",
    "ConfigFileError",
    "ModelArguments",
    "RetrievalEvalCallback",
    "TokenizerTrainingError",
    "apply_peft",
    "export_peft",
    "load_yaml_config",
    "parse_args",
    "resume_checkpoint",
    "run_recipe",
    "train_or_reuse_tokenizer",
    "train_tokenizer",
]
